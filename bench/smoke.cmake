# ctest's bench_smoke: the benchmark runs one case of each family (holonomic,
# nonholonomic, mixed, Lagrangian) on cpu and reference, tiny, and reports
# every record and no error.
# cmake -DBENCH=<tether_bench> -DOUT=<file.json> -P smoke.cmake
execute_process(COMMAND ${BENCH} --quick --quiet --systems spherical_pendulum,heisenberg,sphere_contact,magnetic_sphere
                        --methods rattle,gauss_legendre_2,rattle_midpoint,variational --backends cpu,reference --sizes 64 --steps 2
                        --repeats 1 --min-time 0 --reference-budget 0 --reference-size 8 --reference-steps 1
                        --no-warmup -o ${OUT}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "tether_bench exited ${rc}: ${err}")
endif()
file(READ ${OUT} doc)
string(JSON records LENGTH "${doc}" records)
string(JSON errors LENGTH "${doc}" errors)
if(NOT records EQUAL 8 OR NOT errors EQUAL 0)
  message(FATAL_ERROR "expected 8 records and no errors, got ${records} records and ${errors} errors: ${OUT}")
endif()
