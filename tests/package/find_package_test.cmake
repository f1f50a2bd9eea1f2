# ctest (tests/package/CMakeLists.txt): the installed package works for a project outside the source tree.
# Installs BUILD_DIR into a fresh prefix under the system temp dir, copies examples/find_package/ next to
# it, configures it against that prefix alone (with the compiler and generator of the build), builds it
# and runs it. Fails if the install, find_package(vla), the build or the run fails, if the example finds
# another vla package or reads a header from the source tree, or if its output is not the expected line.
# Inputs: BUILD_DIR, SOURCE_DIR, CXX, GENERATOR.
if(DEFINED ENV{TMPDIR})
  set(tmp $ENV{TMPDIR})
else()
  set(tmp /tmp)
endif()
string(RANDOM LENGTH 10 tag)
set(work ${tmp}/vla-package-test-${tag})
file(MAKE_DIRECTORY ${work})

function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    file(REMOVE_RECURSE ${work})
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${work}/prefix)
file(COPY ${SOURCE_DIR}/examples/find_package/ DESTINATION ${work}/example)
step("configure" ${CMAKE_COMMAND} -S ${work}/example -B ${work}/build -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
     -DCMAKE_PREFIX_PATH=${work}/prefix -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
file(STRINGS ${work}/build/CMakeCache.txt vla_dir REGEX "^vla_DIR:")
string(FIND "${vla_dir}" "vla_DIR:PATH=${work}/prefix/" at)
if(NOT at EQUAL 0)
  file(REMOVE_RECURSE ${work})
  message(FATAL_ERROR "the example found another vla package: ${vla_dir}")
endif()
file(READ ${work}/build/compile_commands.json commands)
string(FIND "${commands}" "${SOURCE_DIR}" at)
if(NOT at EQUAL -1)
  file(REMOVE_RECURSE ${work})
  message(FATAL_ERROR "the example's compile command names the source tree ${SOURCE_DIR}:\n${commands}")
endif()
step("build" ${CMAKE_COMMAND} --build ${work}/build)
step("run" ${work}/build/layer_precision)
file(REMOVE_RECURSE ${work})
message("${out}")
if(NOT out MATCHES "vla layer, T = 16, d_model = 8: max \\|y_double - y_mp50\\| / max \\|y_mp50\\| = [0-9.]+e-[0-9]+")
  message(FATAL_ERROR "unexpected output of the example:\n${out}")
endif()
