/*
 * BIP-340 batch verification for snap-spark's native core.
 *
 * libsecp256k1 checks one signature at a time through its public API. Its internal
 * multi-scalar multiplication (Strauss for small sums, Pippenger for large ones) is not
 * public, so this file is compiled against the library's own source, the copy the
 * `secp256k1-sys` crate builds: it includes the internal headers (every function in
 * them is `static`, so nothing here clashes with that crate's symbols) and shares its
 * precomputed tables of multiples of G at link time. native/build.rs finds the source.
 *
 * The check (BIP-340, "Batch Verification"): for signatures (r_i, s_i) on messages m_i
 * under x-only keys P_i, with challenges e_i and random weights a_i (a_0 = 1),
 *
 *     (sum a_i s_i) G  =  sum a_i R_i  +  sum_k (sum_{i: P_i = k} a_i e_i) P_k
 *
 * where R_i is the point with x = r_i and an even y. Signatures under the same key share
 * one point in the sum, so a batch of n signatures by k agents costs n + k points.
 * Every valid batch passes; a batch holding an invalid signature passes with a
 * probability of about 2^-128 over the weights. The caller (check.rs) re-checks a failed
 * batch in halves and finally one signature at a time, so a failed batch never decides a
 * verdict by itself.
 *
 * The prefix `rustsecp256k1_v0_14_` is the one secp256k1-sys 0.14 renames the library's
 * symbols with; build.rs passes it as SNAP_SECP and the names below are built from it.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "assumptions.h"
#include "util.h"
#include "field_impl.h"
#include "scalar_impl.h"
#include "group_impl.h"
#include "int128_impl.h"
#include "scratch_impl.h"
#include "ecmult_impl.h"

#define SNAP_CAT2(a, b) a##b
#define SNAP_CAT(a, b) SNAP_CAT2(a, b)
#define S(name) SNAP_CAT(SNAP_SECP, name)

typedef S(scalar) snap_scalar;
typedef S(ge) snap_ge;
typedef S(gej) snap_gej;
typedef S(fe) snap_fe;
typedef S(scratch) snap_scratch;
typedef S(callback) snap_callback;

/* The library calls this only on a misuse of its scratch space; the batch then fails
 * (the caller re-checks it one signature at a time), so nothing aborts. */
static void snap_note_error(const char *text, void *data) {
    (void)text;
    *(int *)data = 1;
}

struct snap_points {
    const snap_scalar *sc;
    const snap_ge *pt;
};

static int snap_point_of(snap_scalar *sc, snap_ge *pt, size_t idx, void *data) {
    const struct snap_points *points = (const struct snap_points *)data;
    *sc = points->sc[idx];
    *pt = points->pt[idx];
    return 1;
}

/*
 * Check n signatures at once.
 *
 *   sigs     n * 64 bytes: r || s of each signature
 *   chals    n * 32 bytes: the BIP-340 challenge hash of each (tagged SHA-256 of
 *            r || P.x || m), reduced mod the group order here as the library does
 *   weights  n * 16 bytes: the random weight of each signature (the first is taken as 1)
 *   key_of   n indices into keys
 *   keys     k * 32 bytes: the distinct x-only keys
 *
 * Returns 1 when every signature verifies, 0 when at least one does not (or cannot be
 * read: r not below p or not an x-coordinate, s not below the group order).
 */
int snap_bip340_batch_verify(const unsigned char *sigs, const unsigned char *chals,
                             const unsigned char *weights, const uint32_t *key_of,
                             size_t n, const unsigned char *keys, size_t k) {
    size_t i, points = n + k, scratch_size;
    snap_scalar *sc;
    snap_ge *pt;
    snap_scalar g_sc, s, e, a, ae;
    snap_fe x;
    snap_gej result;
    snap_scratch scratch;
    snap_callback on_error;
    struct snap_points data;
    int error = 0, ok = 0;

    if (n == 0) {
        return 1;
    }
    sc = (snap_scalar *)malloc(points * sizeof(snap_scalar));
    pt = (snap_ge *)malloc(points * sizeof(snap_ge));
    if (sc == NULL || pt == NULL) {
        goto done;
    }
    for (i = 0; i < k; i++) {
        if (!S(fe_set_b32_limit)(&x, &keys[32 * i]) || !S(ge_set_xo_var)(&pt[n + i], &x, 0)) {
            goto done;
        }
        S(scalar_set_int)(&sc[n + i], 0);
    }
    S(scalar_set_int)(&g_sc, 0);
    for (i = 0; i < n; i++) {
        unsigned char wide[32];
        int overflow;
        const unsigned char *sig = &sigs[64 * i];
        if (key_of[i] >= k) {
            goto done;
        }
        /* R_i: x = r, y even; a signature whose r is no such point is invalid */
        if (!S(fe_set_b32_limit)(&x, sig) || !S(ge_set_xo_var)(&pt[i], &x, 0)) {
            goto done;
        }
        S(scalar_set_b32)(&s, &sig[32], &overflow);
        if (overflow) {
            goto done;
        }
        S(scalar_set_b32)(&e, &chals[32 * i], NULL);
        if (i == 0) {
            S(scalar_set_int)(&a, 1);
        } else {
            memset(wide, 0, 16);
            memcpy(&wide[16], &weights[16 * i], 16);
            S(scalar_set_b32)(&a, wide, NULL);
            if (S(scalar_is_zero)(&a)) {
                S(scalar_set_int)(&a, 1);
            }
        }
        /* G's scalar gathers a_i s_i; R_i's is -a_i; the key's gathers -a_i e_i */
        S(scalar_mul)(&s, &s, &a);
        S(scalar_add)(&g_sc, &g_sc, &s);
        S(scalar_negate)(&sc[i], &a);
        S(scalar_mul)(&ae, &a, &e);
        S(scalar_negate)(&ae, &ae);
        S(scalar_add)(&sc[n + key_of[i]], &sc[n + key_of[i]], &ae);
    }

    /* room for Pippenger over every point, or Strauss when there are few */
    scratch_size = S(pippenger_scratch_size)(points, S(pippenger_bucket_window)(points))
                   + PIPPENGER_SCRATCH_OBJECTS * ALIGNMENT;
    if (S(strauss_scratch_size)(points) + STRAUSS_SCRATCH_OBJECTS * ALIGNMENT > scratch_size) {
        scratch_size = S(strauss_scratch_size)(points) + STRAUSS_SCRATCH_OBJECTS * ALIGNMENT;
    }
    memcpy(scratch.magic, "scratch", 8);
    scratch.alloc_size = 0;
    scratch.max_size = scratch_size;
    scratch.data = malloc(scratch_size);
    if (scratch.data == NULL) {
        goto done;
    }
    on_error.fn = snap_note_error;
    on_error.data = &error;
    data.sc = sc;
    data.pt = pt;
    if (S(ecmult_multi_var)(&on_error, &scratch, &result, &g_sc, snap_point_of, &data, points)
        && !error) {
        ok = S(gej_is_infinity)(&result);
    }
    free(scratch.data);

done:
    free(sc);
    free(pt);
    return ok;
}
