# graph.fb bindings, generated from ir/graph.fbs by flatc --python; do not edit.
