# What `pip install <repo>` (scikit-build-core, pyproject.toml) puts into the dyngen package:
# libdyngen.so and the CLI next to the Python modules, and the public and device headers.
# Only under scikit-build-core: a developer's `cmake --install` has nothing to do with it.
if(NOT DEFINED SKBUILD)
  return()
endif()

# The toolkit's NVRTC is found through the RPATH when it is not on the loader's path.
set_target_properties(dyngen_capi dyngen PROPERTIES INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
install(TARGETS dyngen_capi LIBRARY DESTINATION dyngen COMPONENT python)
install(TARGETS dyngen RUNTIME DESTINATION dyngen/bin COMPONENT python)
# dyngen.h includes the counters' list (dyngen_stats.def), which ships beside it.
install(FILES ${PROJECT_SOURCE_DIR}/runtime/dyngen.h ${PROJECT_SOURCE_DIR}/runtime/dyngen_stats.def
        DESTINATION dyngen/include COMPONENT python)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/codegen/device/ DESTINATION dyngen/include/device
        COMPONENT python FILES_MATCHING PATTERN "*.cuh")
