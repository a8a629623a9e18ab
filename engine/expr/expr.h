/* expr.h — the expression language: a hash-consed DAG of simplified expressions.
 *
 * All nodes live in an expr_ctx arena and are unique: building the same expression
 * twice gives the same pointer, so equality is pointer equality and shared
 * sub-expressions are shared for free. Constructors simplify as they build (numbers
 * folded, sums and products flattened, like terms and like powers collected, terms
 * sorted into one canonical order), so printing a parsed expression and parsing the
 * print gives back the same node.
 *
 * Sums carry their constant term in `num` and products their numeric coefficient in
 * `num`; neither has NUM children. Division is a product with a negative power,
 * subtraction a sum with a -1 coefficient.
 *
 * Ownership: nodes are owned by their context and live until expr_ctx_free, or until
 * an expr_ctx_rollback to a mark taken before they were made. When a
 * node cap is hit, constructors return the context's NaN node and set ctx->overflow;
 * callers check it after each phase instead of after each call.
 */
#ifndef HAMEL_EXPR_H
#define HAMEL_EXPR_H

#include <stddef.h>
#include <stdint.h>

typedef enum expr_kind {
    EXPR_NUM,
    EXPR_SYM,
    EXPR_FUN,
    EXPR_POW,
    EXPR_MUL,
    EXPR_ADD,
} expr_kind;

typedef enum expr_fn {
    FN_SIN,
    FN_COS,
    FN_TAN,
    FN_ASIN,
    FN_ACOS,
    FN_ATAN,
    FN_ATAN2,
    FN_SINH,
    FN_COSH,
    FN_TANH,
    FN_EXP,
    FN_LOG,
    FN_SQRT,
    FN_ABS,
    FN_SIGN, /* -1, 0, 1 (0 at 0): d abs(a) = sign(a) da, finite at a = 0 */
    FN_COUNT
} expr_fn;

/* What a symbol stands for. */
typedef enum sym_class {
    SYM_COORD,    /* q_i */
    SYM_VELOCITY, /* q_i' */
    SYM_PARAM,    /* a named constant */
    SYM_TIME,     /* t */
    SYM_SPEED,    /* a quasi-velocity u_r (only in derived equations) */
    SYM_ACCEL,    /* u_r' (only in printed equations) */
    SYM_DEF,      /* a definition: parses as its value (expr_symbol.node) */
    SYM_OTHER,
} sym_class;

typedef struct expr expr;
struct expr {
    uint32_t id;  /* creation index, dense from 0 */
    uint8_t kind; /* expr_kind */
    uint8_t fn;   /* expr_fn for EXPR_FUN */
    uint16_t nargs;
    uint8_t nonfinite; /* a number in it (value, constant term, coefficient) is inf or nan */
    int32_t sym;       /* symbol index for EXPR_SYM */
    uint32_t hash;
    uint64_t deps; /* bit (s % 64) set for every symbol s it may depend on */
    double num;    /* value (NUM), constant term (ADD), coefficient (MUL) */
    expr **args;
};

typedef struct expr_symbol {
    char *name;
    sym_class cls;
    int index; /* index within its class (coordinate number, parameter number, ...) */
    expr *node;
} expr_symbol;

typedef struct expr_ctx expr_ctx;

/* A new, empty context whose node count may not exceed max_nodes (0: no cap).
 * Caller frees with expr_ctx_free. */
expr_ctx *expr_ctx_new(size_t max_nodes);

/* Frees a context and every node in it. Accepts NULL. */
void expr_ctx_free(expr_ctx *c);

/* Nonzero once a constructor has hit the node cap. */
int expr_ctx_overflow(const expr_ctx *c);

/* Nodes created so far and bytes held by the context. */
size_t expr_ctx_nodes(const expr_ctx *c);
size_t expr_ctx_bytes(const expr_ctx *c);

/* A mark on a context: its state before a tentative build (a form derivation) that
 * expr_ctx_rollback can return it to. The fields are the context's counts and
 * capacities at the mark; only expr.c reads them. */
typedef struct expr_mark {
    size_t nnodes, nodes_cap, cap, bytes;
    void *chunk; /* the arena's newest chunk at the mark, and how much of it was used */
    size_t chunk_used;
    int nsyms, syms_cap, overflow;
    size_t sym_table_cap, memo_cap, zero_cap, zero_lcap, expand_cap, tree_cap, subst_cap;
    uint64_t class_deps[SYM_OTHER + 1];
} expr_mark;

/* Records the context's state in *mk. */
void expr_ctx_mark(const expr_ctx *c, expr_mark *mk);

/* Returns the context to the state recorded by expr_ctx_mark: frees every node created
 * since (and takes it out of the hash-consing table, the number cache and every memo
 * that may point to it), removes the symbols added since, gives back the memory the
 * tables and memos grew by, and restores the overflow flag. Nodes and symbols that
 * existed at the mark are untouched; cached results about them that involve newer
 * nodes are forgotten. Marks nest: a rollback undoes every later mark too. Pointers to
 * nodes created after the mark are dangling afterwards. */
void expr_ctx_rollback(expr_ctx *c, const expr_mark *mk);

/* Attaches a compile budget (budget.h) that the constructors and the long loops of
 * expansion, differentiation, substitution, printing and tape building tick; once it
 * has stopped, constructors return the NaN node and set the overflow flag. NULL
 * detaches. The budget is borrowed and must outlive its attachment. */
struct budget;
void expr_ctx_set_budget(expr_ctx *c, struct budget *b);
struct budget *expr_ctx_budget(const expr_ctx *c);

/* Adds a symbol (the name is copied) and returns its index; -1 if the name exists. */
int expr_sym_add(expr_ctx *c, const char *name, sym_class cls, int index);

/* Looks a symbol up by name; -1 if absent. */
int expr_sym_find(const expr_ctx *c, const char *name);

/* The symbol table entry of index s (borrowed), and the count. */
const expr_symbol *expr_sym_get(const expr_ctx *c, int s);
int expr_sym_count(const expr_ctx *c);

/* Node constructors. Arguments are nodes of the same context; results are owned by
 * it. */
expr *expr_num(expr_ctx *c, double v);
expr *expr_sym(expr_ctx *c, int s);
expr *expr_add(expr_ctx *c, expr *a, expr *b);
expr *expr_sub(expr_ctx *c, expr *a, expr *b);
expr *expr_mul(expr_ctx *c, expr *a, expr *b);
expr *expr_div(expr_ctx *c, expr *a, expr *b);
expr *expr_neg(expr_ctx *c, expr *a);
expr *expr_pow(expr_ctx *c, expr *base, expr *exponent);
expr *expr_powi(expr_ctx *c, expr *base, int k);
expr *expr_fun(expr_ctx *c, expr_fn fn, expr *a);
expr *expr_fun2(expr_ctx *c, expr_fn fn, expr *a, expr *b);

/* Sum and product of n nodes (n may be 0). */
expr *expr_sum(expr_ctx *c, expr **terms, int n);
expr *expr_product(expr_ctx *c, expr **factors, int n);

/* Splits a node into its numeric coefficient and the rest (rest = 1 for numbers). */
double expr_split_coeff(expr_ctx *c, expr *e, expr **rest);

/* Nonzero if e is the number v. */
int expr_is_num(const expr *e, double v);

/* Nonzero if e may depend on symbol s (a conservative test on the deps mask, exact
 * on the tree). */
int expr_depends(const expr *e, int s);

/* Nonzero if e depends on any symbol of class cls. */
int expr_depends_class(const expr_ctx *c, const expr *e, sym_class cls);

/* The symbolic derivative d e / d (symbol s). */
expr *expr_diff(expr_ctx *c, expr *e, int s);

/* The total time derivative holding second derivatives at zero:
 * sum_k de/dq_k q_k' + de/dt (+ de/dq_k' * 0). */
expr *expr_dt(expr_ctx *c, expr *e);

/* Replaces symbols: sub[s] (NULL: keep) for each symbol index s < n_sub. */
expr *expr_subst(expr_ctx *c, expr *e, expr **sub, int n_sub);

/* Expands products and integer powers of sums into a sum of monomials, rewriting
 * cos(x)^k (k >= 2) as cos(x)^(k-2) (1 - sin(x)^2) so that trigonometric identities
 * cancel, and collects like terms (simplify.c). A sub-expression that would exceed
 * max_terms terms is kept unexpanded. */
expr *expr_expand(expr_ctx *c, expr *e, int max_terms);

/* The number of nodes of e written out as a tree (shared sub-expressions counted each
 * time they occur), saturating at EXPR_TREE_SIZE_MAX: what printing or expanding e
 * would walk. Memoised per node in the context, so linear in the DAG. */
#define EXPR_TREE_SIZE_MAX 1000000u
size_t expr_tree_size(expr_ctx *c, const expr *e);

/* Rewrites each root with the factors that terms of a sum share pulled out, greedily
 * and recursively (a*b + a*c + d -> a*(b + c) + d; multivariate Horner), so that a
 * tape needs fewer multiplications. Equal in value, not in rounding. One memo for the
 * batch (simplify.c). */
void expr_factor_sums(expr_ctx *c, expr **roots, int n);

/* The name of a function and the function of a name (-1 if unknown). */
const char *expr_fn_name(expr_fn fn);

/* ---- parsing ---- */

/* What the parser accepts in one expression. */
typedef struct expr_parse_opts {
    int allow_velocity; /* q' allowed */
    int allow_time;     /* t allowed */
    size_t max_chars;   /* 0: no cap */
    const char *what;   /* the field, for messages ("potential_energy") */
} expr_parse_opts;

/* A parse error: 1-based column of the offending character and the reason. */
typedef struct expr_error {
    int column;
    char message[160];
} expr_error;

/* Parses text in the context's symbols (coordinates, their velocities, parameters,
 * definitions, t, pi). Returns the node, or NULL with *err filled. */
expr *expr_parse(expr_ctx *c, const char *text, const expr_parse_opts *opts, expr_error *err);

/* Nonzero if name is a function of the language, t or pi. */
int expr_name_reserved(const char *name);

/* Registers a definition: a name that parses as the given node. Returns the symbol
 * index or -1 if the name exists. */
int expr_def_add(expr_ctx *c, const char *name, expr *value);

/* ---- printing ---- */

/* Prints e in the input language, canonically: parse(print(e)) == e. Returns a new
 * string the caller frees, or NULL on allocation failure. */
char *expr_print(const expr_ctx *c, const expr *e);

/* Prints e as LaTeX. Caller frees. */
char *expr_print_latex(const expr_ctx *c, const expr *e);

/* ---- numbers ---- */

/* Evaluates e with values for every symbol (vals indexed by symbol index). Walks the
 * tree with a memo; for tests and one-off evaluations, not hot paths (see tape.h). */
double expr_eval(const expr_ctx *c, const expr *e, const double *vals);

/* Decides "identically zero", soundly: 1 only when e is the number 0, or when at
 * ZERO_MIN_TRUSTED or more deterministic pseudo-random points of all symbols (some in
 * [0.35, 1.35), most over scales 1e-3..1e4 of either sign) e is within 1e-9 of the
 * scale of its terms and no point says otherwise. A point proves nothing where any
 * subexpression underflows, overflows, leaves its function's domain, leaves the safe
 * range [1e-150, 1e150] or computes a function of an argument whose digits were lost
 * to cancellation. 0 ("keep the term") whenever zero is not proven. */
int expr_is_zero(expr_ctx *c, expr *e);

/* 1 if every subexpression of roots[0..n) (NULL roots skipped) evaluated at vals
 * (indexed by symbol) stays trustworthy in the sense of expr_is_zero: finite, in the
 * safe range, no underflow, no function of a cancelled argument. A numeric test at a
 * point where this is 0 proves nothing there. */
int expr_trusted_at(const expr_ctx *c, expr *const *roots, int n, const double *vals);

#endif
