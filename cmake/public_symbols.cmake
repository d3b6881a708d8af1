# Writes the linker version script of librevtorch.so from the public header:
# the functions that include/revtorch.h declares (after the preprocessor, so
# through every public sub-header and without comments) are global under the
# version node REVTORCH_<MAJOR>; everything else in the library is local.
# Also writes the list of those names, one a line, without the static inline
# ones (they are not in the library), for tests/install_test.sh.
#
#   cmake -DCC=<compiler> -DHEADER=include/revtorch.h -DINCLUDE=<dir holding
#         revtorch/> -DMAJOR=0 -DMAP=<out.map> -DLIST=<out.txt> -P public_symbols.cmake
execute_process(COMMAND ${CC} -std=c11 -E -P -I${INCLUDE} ${HEADER}
                OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "preprocessing ${HEADER} failed:\n${err}")
endif()
# Every identifier rt_* followed by "(" but not by "(*" (a function-pointer
# type such as `typedef rt_status (*rt_loss_fn)(...)` returns an rt_*):
# declarations, and calls inside the static inline functions of the headers
# (those callees must be exported too). The match starts at any identifier,
# so it never starts inside one; the "(*" case is kept and dropped below.
string(REGEX MATCHALL "[A-Za-z_][A-Za-z0-9_]*[ \t\r\n]*\\([ \t\r\n]*\\**" calls "${text}")
string(REGEX MATCHALL "static inline [^;{(]*[^A-Za-z0-9_]rt_[A-Za-z0-9_]+[ \t\r\n]*\\(" inlines "${text}")
set(names "")
foreach(m ${calls})
  if(m MATCHES "^rt_" AND NOT m MATCHES "\\*$")
    string(REGEX MATCH "^rt_[A-Za-z0-9_]+" n "${m}")
    list(APPEND names ${n})
  endif()
endforeach()
set(inline_names "")
foreach(m ${inlines})
  string(REGEX MATCH "rt_[A-Za-z0-9_]+[ \t\r\n]*\\($" n "${m}")
  string(REGEX MATCH "rt_[A-Za-z0-9_]+" n "${n}")
  list(APPEND inline_names ${n})
endforeach()
list(REMOVE_DUPLICATES names)
list(SORT names)
list(REMOVE_ITEM names ${inline_names})
list(LENGTH names count)
if(count LESS 10)
  message(FATAL_ERROR "only ${count} public functions found in ${HEADER}: the header list is broken")
endif()
string(REPLACE ";" ";\n    " globals "${names}")
file(WRITE ${MAP} "/* Generated from ${HEADER} by cmake/public_symbols.cmake. */\nREVTORCH_${MAJOR} {\n  global:\n    ${globals};\n  local:\n    *;\n};\n")
string(REPLACE ";" "\n" lines "${names}")
file(WRITE ${LIST} "${lines}\n")
