"""The generic compiled loops, and the helpers every step function shares (private).

An algorithm provides its step; :func:`chain_loop` and :func:`ensemble_loop` make of it,
once per step function and process, the compiled loop that advances a chunk of replicas
over a block of steps in place. The loop owns everything that is not the
algorithm: copying a replica's state into buffers of its own (so that two threads never
write the same cache line step after step), the divergence check (every coordinate of
``theta`` within ``[-bound, bound]``, the other state arrays finite; ``bound`` is the largest
float when there is none, so that the one comparison also fails for NaN and inf), storing
draws or running moments, and skipping replicas that diverged.

Step functions
--------------
Independent chains (``coupling = "independent"``) take one gradient per step, at
``theta``, and one Gaussian draw after it; their step comes in two halves::

    move(x, theta, a, consts)                    # before the gradient (e.g. theta += v)
    update(x, theta, g, z, noisy, a, k, consts)  # after the gradient and the noise
    update(x, theta, g, z, noisy, a, t, k, consts)  # the same, reading the step's temperature t

The loop itself evaluates ``g = grad U~(theta)`` between the halves (the stochastic
gradient draws its minibatch from the chain's stream first), then draws the step's noise
``z`` (see Noise below, in the state's coordinates; ``noisy`` is False, and nothing is
drawn, where its covariance is zero). ``x`` is the chain's state, shape ``(n_state, d)``,
``theta`` its row 0, ``a`` the step size, ``k`` the step's index in the run (0-based; e.g.
where an averaging window starts), ``consts`` the algorithm's constants (a tuple, which may
hold arrays).
The halves are written into the loop's source (:mod:`sgsim.integrators._splice`) rather
than called: numba's inlining of a helper that takes the target's parameters, the stream or
the noise factors costs atomic reference-count updates on each of them at every step (40-100
ns on the 25-Gaussian mixture, more than the gradient), and a view made at every step
(``x[0]``) costs the same, so ``theta`` is made once per call.

A few chains a thread (fewer than ``FEW_CHAINS``) on a target whose block gradient has a one-point
form (:func:`sgsim.targets._base.lane_form`: the shipped 2-D mixtures) run in :func:`_chain_loop`
with that form written into the step in place of the gradient call (``BLOCK``): one chain at a
time, each with the bits the lane loop would give it, and none of the lanes' copies or the block
gradient's call at every step (SGLD on the 25-Gaussian mixture, 2 chains on one thread: 104 -> 92 ns
a chain-step; 74 since the one-point form skips the components the per-point form skips and takes
the largest weight, 1, without an exponential).

Interacting ensembles (``coupling = "interacting"``)::

    step(X, G, B, P, W, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats)

advances one ensemble: ``X`` has shape ``(n_state, L, d)``; ``G`` and ``B`` are ``(L, d)``
buffers, ``P`` an ``(L, L)`` buffer for pair terms and ``W`` one of ``L * L + 2048`` values; ``works`` and
``rngs`` hold one row per particle; ``inj`` standard normals that replace the streams' (shape
``(nb, L, d)``, or empty); ``P`` has the algorithm's ``pair_shape`` (``(L, L)`` unless it says
otherwise) and ``W`` as many values plus 2048; ``stats`` is a ``(n_stats,)`` buffer the step may fill with per-step
statistics (e.g. the bandwidth it used), stored with each kept draw. A step whose record sets
``potential`` takes one more parameter, ``log_density`` (the target's compiled log density), last.

Stores
------
``store[j]`` says what happens after step ``j`` of the block: ``s >= 0`` stores the kept
row of the state (``theta`` unless the algorithm keeps another, e.g. IASG's running average;
``KEPT_ROW``, fixed when the loop is made) as draw ``s``, ``MOMENTS`` (-2) adds it to the
replica's running mean and covariance (Welford's update; for an ensemble, each
particle's), ``NOTHING`` (-1) does neither.

Noise
-----
The Gaussian part of a step, whatever its covariance, is drawn as ``basis @ (sd[j] * xi)``
with ``xi`` standard normals: ``sd`` (shape ``(nb, d)``) holds the square roots of the
covariance's eigenvalues at each step and ``basis`` its eigenvectors, which
``rotate = False`` declares to be the identity (diagonal covariances). The loops get the
eigenvectors as rows (``basis.T``, contiguous: :attr:`NoiseBasis.rows`). A step whose ``sd`` is
zero (``any_noise[j]`` False) draws nothing, so a noise-free stage leaves the stream
untouched. With the per-step temperatures ``temps`` (read by updates that take ``t``, and by
ensemble steps) they make the tuple ``noise = (sd, basis.T, rotate, any_noise, temps)``.
"""

from __future__ import annotations

import functools
import math
import types

import numpy as np

from .._jit import jit
from ..philox import fill_normals
from ..rng import STATE_WORDS, integers, standard_normal
from ._splice import splice

NOTHING = -1
MOMENTS = -2
# whether an ensemble loop's step takes the target's log density (a compile-time constant of each loop)
POTENTIAL = False
# the state row a chain loop stores (a compile-time constant of each generated loop)
KEPT_ROW = 0
# whether a chain loop draws its normals from counter-based Philox streams (a stream row holds the
# run's key and the chain's index) rather than from PCG64 states (a compile-time constant)
PHILOX = False
# normals a Philox chain fills at once (about this many: whole steps of d), so that the generator's
# loop over blocks is long enough to vectorise
SPAN = 128
# chains a lane loop advances side by side (the width of its block gradient)
LANES = 64
# whether a lane loop's step has a move half to run (a compile-time constant: False for ``stay``)
MOVES = True
# a lane loop's state shape (n_state, d), compile-time constants
NS = 1
D = 1
# whether a chain loop takes each gradient from the one-point form of the target's block gradient,
# written into its step (``_grad_lane``), and the length of that form's working row (compile-time)
BLOCK = False
LANE_WORK = 0
# chunks of fewer chains than this run in such a chain loop, not in the lane loop: so few lanes fill no
# vector register, and the lane loop's call of the block gradient at every step, with the copies in
# and out of its lanes, cost more than the lanes save
FEW_CHAINS = 8


@jit(inline=True)
def gradient(x, g, grad_u, stochastic_grad_u, params, work, rng):
    """``g = grad U(x)``: the exact gradient, or the target's stochastic one when it has one.

    For the particle loops of ensembles, whose pair terms dwarf a call's overhead.
    """
    # pruned at compile time: one specialisation per gradient kind
    if stochastic_grad_u is None:
        grad_u(x, params, g)
    else:
        stochastic_grad_u(x, params, g, rng, work)


@jit(inline=True)
def stay(x, theta, a, consts):
    """The ``move`` of algorithms that take the gradient where the chain stands."""
    return None


@jit(inline=True)
def copy_into(src, dst):
    # an explicit loop: a slice assignment here triples the compile time of a kernel
    for i in range(src.shape[0]):
        dst[i] = src[i]
    return dst


@jit(inline=True)
def all_finite(x):
    # no early exit: a branch-free loop is faster on short rows
    ok = True
    for i in range(x.shape[0]):
        ok = ok and math.isfinite(x[i])
    return ok


@jit(inline=True)
def within(x, bound):
    # every |x_i| <= bound: False for NaN and inf too, when the bound is the largest float
    ok = True
    for i in range(x.shape[0]):
        ok = ok and abs(x[i]) <= bound
    return ok


@jit(inline=True)
def _store_lane(x, theta, xb, th, q, n_state, d):
    """Put one chain's working state back into lane ``q``: all its rows into ``xb``, its position
    into the gradient's input ``th``.
    """
    for r in range(n_state):
        for i in range(d):
            xb[q, r, i] = x[r, i]
    for i in range(d):
        th[i, q] = theta[i]


@jit(inline=True)
def welford_update(x, count, mean, m2, c, delta):
    """Add ``x`` (shape ``(d,)``) to replica ``c``'s running mean and co-moment matrix."""
    count[c] += 1
    n = count[c]
    d = x.shape[0]
    for i in range(d):
        delta[i] = x[i] - mean[c, i]
        mean[c, i] += delta[i] / n
    # M2 += (x - mean_old)(x - mean_new)^T, symmetric in exact arithmetic; computed as
    # delta_old[i] * (x[m] - mean_new[m]) for every (i, m)
    for i in range(d):
        for m in range(d):
            m2[c, i, m] += delta[i] * (x[m] - mean[c, m])


def _move(x, theta, a, consts):
    """Placeholder for an algorithm's ``move``, spliced into :func:`_chain_loop`."""
    raise NotImplementedError


def _grad_lane(x, params, out, work):
    """Placeholder for a block gradient's one-point form, spliced into :func:`_chain_loop` (``BLOCK``)."""
    raise NotImplementedError


def _update(x, theta, g, z, noisy, a, t, k, consts):
    """Placeholder for an algorithm's ``update``, spliced into :func:`_chain_loop` (``t`` left out for an
    update that does not take the step's temperature).
    """
    raise NotImplementedError


def _chain_loop(state, rngs, works, failed, grad_u, stochastic_grad_u, params, alpha, consts, noise, k0, bound, store,
         out, count, mean, m2, injected):  # fmt: skip
    n_chains, n_state, d = state.shape
    if BLOCK:
        # the state's shape compiled in (as in the lane loop), so that LLVM unrolls the loops over
        # rows and coordinates
        n_state = NS
        d = D
    nb = alpha.shape[0]
    sd, basis_t, rotate, any_noise, temps = noise
    x = np.empty((n_state, d))
    theta = x[0]
    kept = x[KEPT_ROW]
    g = np.empty(d)
    e = np.empty(d)
    z = np.empty(d)
    delta = np.empty(d)
    st = np.empty(STATE_WORDS, np.uint64)
    span = max(1, SPAN // d)
    zb = np.empty(span * d if PHILOX else 0)
    lane_work = np.empty(LANE_WORK)
    for c in range(n_chains):
        if failed[c] >= 0:
            continue
        for r in range(n_state):
            for i in range(d):
                x[r, i] = state[c, r, i]
        copy_into(rngs[c], st)
        work = works[c]
        inj = injected[c]
        drawn = inj.shape[0] == 0
        # the steps [z_lo, z_hi) of the block whose normals zb holds (Philox streams)
        z_lo = 0
        z_hi = 0
        for j in range(nb):
            a = alpha[j]
            _move(x, theta, a, consts)
            # pruned at compile time: one specialisation per gradient kind
            if BLOCK:
                _grad_lane(theta, params, g, lane_work)
            elif stochastic_grad_u is None:
                grad_u(theta, params, g)
            else:
                stochastic_grad_u(theta, params, g, st, work)
            # the noise basis @ (sd_j * xi), xi from the stream (or injected); none where sd_j = 0
            noisy = any_noise[j]
            if noisy:
                dst = e if rotate else z
                # pruned at compile time: one specialisation per stream scheme
                if PHILOX:
                    if drawn and j >= z_hi:
                        # the normals of the next steps at once: step k's are numbers k d .. k d + d - 1
                        # of the chain's stream, whatever the block, the chunk or the thread
                        z_lo = j
                        z_hi = min(nb, j + span)
                        fill_normals(st, (k0 + j) * d, zb[: (z_hi - j) * d])
                    base = (j - z_lo) * d
                    for i in range(d):
                        dst[i] = sd[j, i] * (zb[base + i] if drawn else inj[j, i])
                else:
                    # one call site of the generator: each inlined copy costs compile time
                    for i in range(d):
                        dst[i] = sd[j, i] * (standard_normal(st) if drawn else inj[j, i])
                if rotate:
                    # z = basis @ e as axpy updates over the eigenvectors (the rows of basis_t):
                    # contiguous, so they vectorise, with each z[i] summed in the order of m
                    for i in range(d):
                        z[i] = 0.0
                    for m in range(d):
                        em = e[m]
                        for i in range(d):
                            z[i] += basis_t[m, i] * em
            k = k0 + j
            t = temps[j]
            _update(x, theta, g, z, noisy, a, t, k, consts)
            # theta within the bound (which fails for NaN and inf too), the rest finite; no early
            # exit: a branch-free loop is faster on short rows
            ok = True
            for i in range(d):
                ok = ok and abs(theta[i]) <= bound
            for r in range(1, n_state):
                for i in range(d):
                    ok = ok and math.isfinite(x[r, i])
            if not ok:
                failed[c] = k0 + j
                break
            s = store[j]
            if s >= 0:
                for i in range(d):
                    out[c, s, i] = kept[i]
            elif s == MOMENTS:
                welford_update(kept, count, mean, m2, c, delta)
        for r in range(n_state):
            for i in range(d):
                state[c, r, i] = x[r, i]
        copy_into(st, rngs[c])


def loop_constants(kept_row=0, philox=False, moves=True, dim=1, n_state=1, lane_work=None) -> dict:
    """The compile-time constants of a generated loop: its kept row, its stream scheme, its move half,
    (for the lane loop) the state's shape, and (for a chain loop with a one-point block gradient) the
    length of that gradient's working row.
    """
    constants = {"KEPT_ROW": int(kept_row), "PHILOX": bool(philox), "MOVES": bool(moves), "D": int(dim),
                 "NS": int(n_state)}  # fmt: skip
    if lane_work is not None:
        constants.update(BLOCK=True, LANE_WORK=int(lane_work))
    return constants


def chain_halves(move, update, lane=None) -> dict:
    """The functions a chain loop has written into it: the step's halves and, with ``lane``, the
    one-point form of the target's block gradient.
    """
    halves = {"_move": move, "_update": update}
    if lane is not None:
        halves["_grad_lane"] = lane
    return halves


@functools.cache
def chain_loop(move, update, kept_row=0, philox=False, lane=None, lane_work=None, dim=1, n_state=1):
    """The compiled loop of an independent-chain step: :func:`_chain_loop` with ``move`` and
    ``update`` written into it (:func:`~sgsim.integrators._splice.splice`), ``KEPT_ROW`` set to
    ``kept_row`` and ``PHILOX`` to ``philox``, once per combination and process.

    With ``lane`` (the one-point form of a target's block gradient, whose working row holds
    ``lane_work`` values) the loop takes each gradient from it, written into the step, and ignores
    its gradient arguments: with Philox streams, a chain then gets the lane loop's bits
    (:func:`lane_loop`), one chain at a time, for the few chains a thread runs. The state's shape
    ``(n_state, dim)`` is then compiled in.
    """
    constants = loop_constants(kept_row, philox, True, dim, n_state, None if lane is None else lane_work)
    return splice(_chain_loop, chain_halves(move, update, lane), jit(cache=False), constants)


def _lane_loop(state, rngs, works, failed, grad_u, grad_u_block, params, alpha, consts, noise, k0, bound, store,
               out, count, mean, m2, injected):  # fmt: skip
    # independent chains LANES at a time, side by side: the move half chain by chain, the gradient of
    # every lane in one call of the target's block gradient (its lane loops vectorised), each lane's
    # normals filled ahead from its Philox stream, the update half chain by chain. The steps, the
    # checks and the stores are those of _chain_loop, in the same order for each chain.
    # the state's shape is compiled in, so that LLVM unrolls the loops over rows and coordinates
    n_chains = state.shape[0]
    n_state = NS
    d = D
    nb = alpha.shape[0]
    sd, basis_t, rotate, any_noise, temps = noise
    w = max(1, min(LANES, n_chains))
    x = np.empty((n_state, d))
    theta = x[0]
    kept = x[KEPT_ROW]
    g = np.empty(d)
    e = np.empty(d)
    z = np.empty(d)
    delta = np.empty(d)
    th = np.zeros((d, w))
    gb = np.empty((d, w))
    # a row at least 256 long: a block gradient may use it for per-component buffers (few lanes)
    scratch = np.empty((8, max(w, 256)))
    xb = np.empty((w, n_state, d))
    span = max(1, SPAN // d)
    zb = np.empty((w, span * d))
    live = np.empty(w, np.bool_)
    drawn = injected.shape[1] == 0
    for c0 in range(0, n_chains, w):
        n = min(w, n_chains - c0)
        for q in range(w):
            live[q] = q < n and failed[c0 + q] < 0
            for i in range(d):
                th[i, q] = state[c0 + q, 0, i] if live[q] else 0.0
        for q in range(n):
            for r in range(n_state):
                for i in range(d):
                    xb[q, r, i] = state[c0 + q, r, i]
        # the steps [z_lo, z_hi) of the block whose normals zb holds
        z_lo = 0
        z_hi = 0
        for j in range(nb):
            a = alpha[j]
            k = k0 + j
            t = temps[j]
            # the move half of a block's first step here; that of every later step at the end of the
            # step before, in the same pass over the chains as its update (the same operations in
            # the same order for each chain, one copy of its state less)
            if MOVES and j == 0:
                for q in range(n):
                    if live[q]:
                        for r in range(n_state):
                            for i in range(d):
                                x[r, i] = xb[q, r, i]
                        _move(x, theta, a, consts)
                        _store_lane(x, theta, xb, th, q, n_state, d)
            grad_u_block(th, params, gb, scratch)
            noisy = any_noise[j]
            if noisy and drawn and j >= z_hi:
                z_lo = j
                z_hi = min(nb, j + span)
                for q in range(n):
                    if live[q]:
                        fill_normals(rngs[c0 + q], k * d, zb[q, : (z_hi - j) * d])
            base = (j - z_lo) * d
            s = store[j]
            for q in range(n):
                if not live[q]:
                    continue
                for r in range(n_state):
                    for i in range(d):
                        x[r, i] = xb[q, r, i]
                for i in range(d):
                    g[i] = gb[i, q]
                if noisy:
                    dst = e if rotate else z
                    for i in range(d):
                        dst[i] = sd[j, i] * (zb[q, base + i] if drawn else injected[c0 + q, j, i])
                    if rotate:
                        for i in range(d):
                            z[i] = 0.0
                        for m in range(d):
                            em = e[m]
                            for i in range(d):
                                z[i] += basis_t[m, i] * em
                _update(x, theta, g, z, noisy, a, t, k, consts)
                ok = True
                for i in range(d):
                    ok = ok and abs(theta[i]) <= bound
                for r in range(1, n_state):
                    for i in range(d):
                        ok = ok and math.isfinite(x[r, i])
                if not ok:
                    for r in range(n_state):
                        for i in range(d):
                            xb[q, r, i] = x[r, i]
                    failed[c0 + q] = k
                    live[q] = False
                    for i in range(d):
                        th[i, q] = 0.0
                    continue
                if s >= 0:
                    for i in range(d):
                        out[c0 + q, s, i] = kept[i]
                elif s == MOMENTS:
                    welford_update(kept, count, mean, m2, c0 + q, delta)
                if MOVES and j + 1 < nb:
                    a_next = alpha[j + 1]
                    _move(x, theta, a_next, consts)
                _store_lane(x, theta, xb, th, q, n_state, d)
        for q in range(n):
            for r in range(n_state):
                for i in range(d):
                    state[c0 + q, r, i] = xb[q, r, i]


@functools.cache
def lane_loop(move, update, kept_row=0, dim=1, n_state=1):
    """The compiled lane loop of an independent-chain step (:func:`_lane_loop`, Philox streams and a
    block gradient), with ``move`` and ``update`` written into it and the state's shape ``(n_state,
    dim)`` compiled in, once per combination and process.
    """
    constants = loop_constants(kept_row, True, move is not stay, dim, n_state)
    return splice(_lane_loop, {"_move": move, "_update": update}, jit(cache=False), constants)


@jit
def draw_batch(st, work, n_data, replace, out):
    """Draw one minibatch of ``out.shape[0]`` indices into ``out`` from the stream ``st``.

    The same draws, in the same order, as the compiled data targets of
    :mod:`sgsim.targets.regression`: with replacement, ``integers(st, 0, N)`` each; without, a
    partial Fisher-Yates shuffle of the chain's permutation buffer ``work``. Called, not
    inlined: numba's inlining of the generator's helpers would cost seconds of compilation
    for a call whose cost is that of ``n`` draws.
    """
    n = out.shape[0]
    if replace:
        for j in range(n):
            out[j] = integers(st, 0, n_data)
    else:
        for j in range(n):
            r = j + integers(st, 0, n_data - j)
            i = work[r]
            work[r] = work[j]
            work[j] = i
            out[j] = i


def _vector_step(state, rngs, works, failed, grads, points, batch, n_data, replace, alpha, consts, noise, k0, j,
                 a_next, bound, store, out, count, mean, m2, injected, update_now, move_next):  # fmt: skip
    # one step of every chain whose gradient was computed outside (all chains in one call):
    # the update half of step j with the given gradients, then the move half of the next step
    # and the next minibatch, whose gradient the caller computes at ``points`` next
    n_chains, n_state, d = state.shape
    sd, basis_t, rotate, any_noise, temps = noise
    e = np.empty(d)
    z = np.empty(d)
    zb = np.empty(d)
    delta = np.empty(d)
    for c in range(n_chains):
        if failed[c] >= 0:
            continue
        x = state[c]
        theta = x[0]
        kept = x[KEPT_ROW]
        st = rngs[c]
        if update_now:
            inj = injected[c]
            drawn = inj.shape[0] == 0
            g = grads[c]
            a = alpha[j]
            noisy = any_noise[j]
            if noisy:
                dst = e if rotate else z
                if PHILOX:
                    if drawn:
                        fill_normals(st, (k0 + j) * d, zb)
                    for i in range(d):
                        dst[i] = sd[j, i] * (zb[i] if drawn else inj[j, i])
                else:
                    for i in range(d):
                        dst[i] = sd[j, i] * (standard_normal(st) if drawn else inj[j, i])
                if rotate:
                    for i in range(d):
                        z[i] = 0.0
                    for m in range(d):
                        em = e[m]
                        for i in range(d):
                            z[i] += basis_t[m, i] * em
            k = k0 + j
            t = temps[j]
            _update(x, theta, g, z, noisy, a, t, k, consts)
            ok = True
            for i in range(d):
                ok = ok and abs(theta[i]) <= bound
            for r in range(1, n_state):
                for i in range(d):
                    ok = ok and math.isfinite(x[r, i])
            if not ok:
                failed[c] = k
                continue
            s = store[j]
            if s >= 0:
                for i in range(d):
                    out[c, s, i] = kept[i]
            elif s == MOMENTS:
                welford_update(kept, count, mean, m2, c, delta)
        if move_next:
            a = a_next
            _move(x, theta, a, consts)
            for i in range(d):
                points[c, i] = theta[i]
            if batch.shape[1] > 0:
                draw_batch(st, works[c], n_data, replace, batch[c])


@functools.cache
def vector_step(move, update, kept_row=0, philox=False):
    """The compiled step of independent chains whose gradients come from outside the loop:
    :func:`_vector_step` with ``move`` and ``update`` written into it, once per combination and process.
    """
    return splice(_vector_step, {"_move": move, "_update": update}, jit(cache=False), loop_constants(kept_row, philox))


def _step(x, g, b, pairs, w, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats,
          *log_density):  # fmt: skip
    """Placeholder for an ensemble algorithm's ``step``, bound in :func:`_ensemble_loop`'s globals."""
    raise NotImplementedError


def _ensemble_loop(state, rngs, works, failed, grad_u, stochastic_grad_u, params, alpha, consts, noise, k0, bound,
                   store, out, count, mean, m2, injected, stats_out, stats_now, pair_shape,
                   log_density=None):  # fmt: skip
    # log_density: the target's, for a step that takes it (Algorithm.potential); None otherwise
    n_rep, n_state, n_part, d = state.shape
    nb = alpha.shape[0]
    g = np.empty((n_part, d))
    b = np.empty((n_part, d))
    pairs = np.empty((pair_shape[0], pair_shape[1]))
    w = np.empty(pair_shape[0] * pair_shape[1] + 2048)
    delta = np.empty(d)
    for r in range(n_rep):
        if failed[r] >= 0:
            continue
        x = state[r]
        inj = injected[r]
        stats = stats_now[r]
        for j in range(nb):
            # pruned at compile time (a constant of each loop): the step's signature is fixed per record
            if POTENTIAL:
                _step(x, g, b, pairs, w, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works[r], rngs[r],
                      inj, stats, log_density)  # fmt: skip
            else:
                _step(x, g, b, pairs, w, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works[r], rngs[r],
                      inj, stats)  # fmt: skip
            ok = True
            for p in range(n_part):
                ok = ok and within(x[0, p], bound)
            for s_ in range(1, n_state):
                for p in range(n_part):
                    ok = ok and all_finite(x[s_, p])
            if not ok:
                failed[r] = k0 + j
                break
            s = store[j]
            if s >= 0:
                for p in range(n_part):
                    copy_into(x[0, p], out[r, s, p])
                for q in range(stats.shape[0]):
                    stats_out[r, s, q] = stats[q]
            elif s == MOMENTS:
                for p in range(n_part):
                    welford_update(x[0, p], count, mean, m2, r * n_part + p, delta)


@functools.cache
def ensemble_loop(step, potential=False):
    """The compiled loop of an interacting-ensemble ``step`` (``step`` may itself run in parallel):
    :func:`_ensemble_loop` with ``step`` bound to ``_step``, once per step and process. With
    ``potential`` (``Algorithm.potential``) the loop passes its ``log_density`` on to the step.
    """
    code = _ensemble_loop.__code__
    bound = {**_ensemble_loop.__globals__, "_step": step, "POTENTIAL": bool(potential)}
    loop = types.FunctionType(code, bound, code.co_name, _ensemble_loop.__defaults__)
    return jit(cache=False)(loop)
