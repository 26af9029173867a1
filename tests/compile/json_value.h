// A small JSON reader for the tests of `dyngen plan --json`: objects, arrays, strings (the escapes
// json_escape writes), numbers, true, false, null. Malformed text throws std::runtime_error, so a
// test that parses the output also checks it is JSON.
#pragma once
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dg::testing {

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> array;
  std::map<std::string, Json> object;

  bool has(const std::string& key) const { return kind == kObject && object.count(key); }
  const Json& operator[](const std::string& key) const {
    auto it = object.find(key);
    if (kind != kObject || it == object.end()) throw std::runtime_error("no key " + key);
    return it->second;
  }
  bool is_null() const { return kind == kNull; }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& text) : s_(text) {}
  Json parse() {
    Json v = value();
    space();
    if (at_ != s_.size()) fail("trailing text");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(at_));
  }
  void space() {
    while (at_ < s_.size() &&
           (s_[at_] == ' ' || s_[at_] == '\n' || s_[at_] == '\t' || s_[at_] == '\r'))
      ++at_;
  }
  bool eat(char c) {
    space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(std::string("expected '") + c + "'");
  }
  bool word(const char* w) {
    std::string x(w);
    if (s_.compare(at_, x.size(), x) != 0) return false;
    at_ += x.size();
    return true;
  }
  std::string str() {
    expect('"');
    std::string out;
    while (at_ < s_.size() && s_[at_] != '"') {
      char c = s_[at_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) fail("bad escape");
      char e = s_[at_++];
      if (e == 'n')
        out += '\n';
      else if (e == 't')
        out += '\t';
      else if (e == 'r')
        out += '\r';
      else if (e == 'b')
        out += '\b';
      else if (e == 'f')
        out += '\f';
      else if (e == 'u') {
        if (at_ + 4 > s_.size()) fail("bad \\u escape");
        out += static_cast<char>(std::strtol(s_.substr(at_, 4).c_str(), nullptr, 16));
        at_ += 4;
      } else {
        out += e;
      }
    }
    if (at_ >= s_.size()) fail("unterminated string");
    ++at_;
    return out;
  }
  Json value() {
    space();
    Json v;
    if (at_ >= s_.size()) fail("unexpected end");
    char c = s_[at_];
    if (c == '{') {
      ++at_;
      v.kind = Json::kObject;
      if (eat('}')) return v;
      do {
        space();
        std::string k = str();
        expect(':');
        v.object[k] = value();
      } while (eat(','));
      expect('}');
    } else if (c == '[') {
      ++at_;
      v.kind = Json::kArray;
      if (eat(']')) return v;
      do v.array.push_back(value());
      while (eat(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::kString;
      v.string = str();
    } else if (word("true")) {
      v.kind = Json::kBool;
      v.boolean = true;
    } else if (word("false")) {
      v.kind = Json::kBool;
    } else if (word("null")) {
      v.kind = Json::kNull;
    } else {
      char* end = nullptr;
      v.number = std::strtod(s_.c_str() + at_, &end);
      if (end == s_.c_str() + at_) fail("expected a value");
      at_ = end - s_.c_str();
      v.kind = Json::kNumber;
    }
    return v;
  }
  const std::string& s_;
  size_t at_ = 0;
};

inline Json parse_json(const std::string& text) { return JsonReader(text).parse(); }

}  // namespace dg::testing
