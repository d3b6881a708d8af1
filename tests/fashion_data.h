/* For tests that also have cases needing the real Fashion-MNIST files
 * (Debian's dataset-fashion-mnist): where they are, whether they are there,
 * and a main() that runs those cases only on request and skips (77) without
 * the files. */
#ifndef RT_TESTS_FASHION_DATA_H
#define RT_TESTS_FASHION_DATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/mnist.h"
#include "rt_test.h"

/* The Fashion-MNIST directory: $RT_FASHION_MNIST_DIR when set and not
 * empty, else where Debian's package installs it (rt_mnist_default_dir). */
static inline const char *fashion_dir(void) {
    const char *env = getenv("RT_FASHION_MNIST_DIR");
    return env && *env ? env : rt_mnist_default_dir();
}

/* The path of IDX file `base` (e.g. "t10k-labels-idx1-ubyte") in
 * fashion_dir(): the .gz name when it exists, else the plain one; "" when
 * neither exists. */
static inline void fashion_file(const char *base, char *path, size_t cap) {
    struct stat st;
    snprintf(path, cap, "%s/%s.gz", fashion_dir(), base);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return;
    snprintf(path, cap, "%s/%s", fashion_dir(), base);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return;
    path[0] = '\0';
}

/* 1 when fashion_dir() holds the four IDX files (each as NAME.gz or NAME). */
static inline int fashion_present(void) {
    static const char *const names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                        "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char p[512];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        fashion_file(names[i], p, sizeof p);
        if (!p[0]) return 0;
    }
    return 1;
}

/* main() of such a test: `--list` lists both sets; no argument or a case
 * name runs `cases` as rt_test_main does; `--fashion` (or the name of one
 * `fashion` case) runs the cases needing the data, or exits 77 (CTest's
 * skip) when the files are missing. */
static inline int rt_test_main_with_fashion(int argc, char **argv, const rt_test_case *cases, int nc,
                                            const rt_test_case *fashion, int nf) {
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < nc; i++) printf("%s\n", cases[i].name);
        for (int i = 0; i < nf; i++) printf("%s\n", fashion[i].name);
        return 0;
    }
    int all = argc > 1 && strcmp(argv[1], "--fashion") == 0, one = 0;
    for (int i = 0; i < nf && argc > 1; i++) one |= strcmp(argv[1], fashion[i].name) == 0;
    if (!all && !one) return rt_test_main(argc, argv, cases, nc);
    if (!fashion_present()) {
        printf("skip: the Fashion-MNIST files are not in %s (apt-get install dataset-fashion-mnist, "
               "or set RT_FASHION_MNIST_DIR)\n", fashion_dir());
        return 77;
    }
    return rt_test_main(all ? 1 : argc, argv, fashion, nf);
}

#endif
