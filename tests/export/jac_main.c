/* tests/export/jac_main.c — prints the Jacobian of a generated C file (included as
 * GENERATED) at a state read from standard input: t, then y[HAMEL_NY]. */
#include GENERATED
#include <stdio.h>

int main(void)
{
    double t, y[HAMEL_NY], J[HAMEL_NY * HAMEL_NY], ft[HAMEL_NY];
    if (scanf("%lf", &t) != 1)
        return 2;
    for (int i = 0; i < HAMEL_NY; i++)
        if (scanf("%lf", &y[i]) != 1)
            return 2;
    if (hamel_jacobian(t, y, hamel_p, J, ft) != 0)
        return 1;
    for (int i = 0; i < HAMEL_NY; i++) {
        for (int c = 0; c < HAMEL_NY; c++)
            printf("%s%.17g", c ? " " : "", J[i * HAMEL_NY + c]);
        printf("\n");
    }
    return 0;
}
