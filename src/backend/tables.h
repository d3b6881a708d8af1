/* The backend tables, defined one per file (cpu.c, meta.c); only
 * backend.c looks them up. Not a public header. */
#ifndef RT_BACKEND_TABLES_H
#define RT_BACKEND_TABLES_H

#include "backend/backend.h"

extern const rt_backend rt_backend_cpu;
extern const rt_backend rt_backend_meta;

#endif
