/* contact.h — rolling contacts whose validity a run checks (issue 18, item 2).
 *
 * A contact is a rolling disk of the model with a coefficient of friction
 * (model.rolling_disks[i].friction). Its forces come from the multipliers of its
 * generated constraints (bodies.c): <name>_contact is the height of the contact point
 * above the ground, so its multiplier is the normal force N (positive pushing the disk
 * off the ground); <name>_rolling and <name>_lateral are the velocity of the contact
 * point along the unit rolling and lateral directions of the ground, so their
 * multipliers are the tangential force's components and |F_t| = sqrt(l_r^2 + l_l^2).
 * The multipliers are those of mult.h (J^T lambda = M q'' - g), in either formulation.
 * When the disk's height is fixed by the coordinates (the contact condition holds
 * identically: a coordinate eliminated by hand) there is no <name>_contact and no way
 * to the normal force: the contact says so instead of guessing.
 *
 * A model written with T and constraints marks its own contacts in "contacts" (model.h:
 * contacts_js): the constraint whose multiplier is the normal force, at most two whose
 * multipliers are the tangential components, and the friction. Those multipliers are
 * forces only when the constraints are written so (the normal one as the height of the
 * contact point, the tangential ones as its velocity along unit directions): their scale
 * follows how the constraint is written. Without "normal" the contact has no normal force.
 */
#ifndef HAMEL_CONTACT_H
#define HAMEL_CONTACT_H

#include "model.h"

#define CONTACT_NAME_MAX 48

typedef struct contact_spec {
    char name[CONTACT_NAME_MAX]; /* the rolling disk's name */
    double mu;                   /* coefficient of friction */
    int normal;                  /* constraint index of <name>_contact, or -1 */
    int tang[2];                 /* <name>_rolling, <name>_lateral, or -1 (zero on the branch) */
} contact_spec;

/* The model's contacts: every rolling disk with a "friction", then the model's own
 * "contacts". Returns their number and
 * sets *out (caller frees; NULL when there are none), or -1 when out of memory. */
int contact_list(const struct engine_model *m, contact_spec **out);

/* Normal and tangential force of c from the multipliers lam[nc]: *normal is NAN when
 * the model gives no normal force. */
void contact_forces(const contact_spec *c, const double *lam, double *normal, double *tangential);

/* The reason a contact has no normal force, for the result. */
#define CONTACT_NO_NORMAL                                                                                    \
    "the model gives no way to the normal force: no constraint holds the contact point's height (it is "     \
    "fixed by the coordinates, a coordinate eliminated by hand); give the body a free height coordinate "    \
    "held by a position constraint (a rolling disk's \"dependent\", or a contact's \"normal\") to get N, "   \
    "lift-off and slip"

#endif
