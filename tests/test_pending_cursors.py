"""`PendingQueue.cursors` walk the queue in policy order while the queue keeps only each shape's
first key sorted (`ShapeCursor`): the order, drops and skips must be those of a plain sort of
every waiting job, whatever adds and removes came before (and whether the sorted first keys
were kept through them or built afterwards)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gfs_opt.model import Job, JobClass
from gfs_opt.pending import PendingQueue

# (pool, g, w, submit) of a job; ids are the list positions
_JOB = st.tuples(st.sampled_from(["A", "B"]), st.sampled_from([250, 1000, 2000]),
                 st.integers(1, 3), st.integers(0, 6))


def _jobs(cls: JobClass, rows: list[tuple[str, int, int, int]]) -> list[Job]:
    return [Job(i, "org", pool, cls, g, w, float(submit), 10.0)
            for i, (pool, g, w, submit) in enumerate(rows)]


def _expected(jobs: list[Job], ids: set[int], pool: str, fifo: bool,
              cls: JobClass) -> list[list[int]]:
    """The ids a pass meets, per cursor, by a plain sort."""
    mine = [j for j in jobs if j.id in ids and j.pool == pool]
    if fifo:
        return [[j.id for j in sorted(mine, key=lambda j: (j.submit, j.id))]] if mine else []
    out = []
    for g in sorted({j.g for j in mine}, reverse=True):
        of_g = [j for j in mine if j.g == g]
        key = ((lambda j: (j.workers, j.submit, j.id)) if cls is JobClass.LP
               else (lambda j: (j.submit, j.id)))
        out.append([j.id for j in sorted(of_g, key=key)])
    return out


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_JOB, min_size=1, max_size=30), data=st.data(),
       cls=st.sampled_from([JobClass.HP, JobClass.LP]), fifo=st.booleans(),
       index_first=st.booleans())
def test_cursors_walk_the_queue_in_policy_order(rows: list[tuple[str, int, int, int]],
                                                 data: st.DataObject, cls: JobClass,
                                                 fifo: bool, index_first: bool) -> None:
    jobs = _jobs(cls, rows)
    q = PendingQueue(cls)
    waiting: set[int] = set()

    def check() -> None:
        for pool in ("A", "B"):
            got = [[jid for jid, _shape in c] for c in q.cursors(pool, fifo)]
            assert [ids for ids in got if ids] == _expected(jobs, waiting, pool, fifo, cls)

    # adds in any order, some removes between them; with ``index_first`` the cursors are
    # asked after every change (the sorted first keys are kept through the changes), else
    # only at the end (they are built from the queue as it is then)
    for j in data.draw(st.permutations(jobs)):
        q.add(j)
        waiting.add(j.id)
        if index_first:
            check()
        if data.draw(st.booleans()) and waiting:
            gone = data.draw(st.sampled_from(sorted(waiting)))
            q.remove(gone)
            waiting.discard(gone)
            if index_first:
                check()
    check()


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(_JOB, min_size=1, max_size=30), data=st.data(), fifo=st.booleans())
def test_drop_and_skip_leave_out_exactly_their_shapes(rows: list[tuple[str, int, int, int]],
                                                      data: st.DataObject, fifo: bool) -> None:
    jobs = _jobs(JobClass.LP, rows)
    q = PendingQueue(JobClass.LP)
    for j in jobs:
        q.add(j)
    shape_of = {j.id: (j.g, j.workers, j.guarantee_h) for j in jobs}
    skipped = set(data.draw(st.lists(st.sampled_from(sorted(set(shape_of.values()))))))
    drop_at = data.draw(st.sets(st.sampled_from(sorted(shape_of))))
    for pool in ("A", "B"):
        expected_all = _expected(jobs, set(shape_of), pool, fifo, JobClass.LP)
        got: list[list[int]] = []
        for c in q.cursors(pool, fifo, skip=skipped.__contains__):
            ids = []
            for jid, shape in c:
                assert shape == shape_of[jid]
                ids.append(jid)
                if jid in drop_at:
                    c.drop()
            got.append(ids)
        # the reference: walk the sorted ids, leaving out skipped shapes and a shape's jobs
        # after one of it was dropped
        want = []
        for ids in expected_all:
            dropped: set[tuple] = set()
            walk = []
            for jid in ids:
                s = shape_of[jid]
                if s in skipped or s in dropped:
                    continue
                walk.append(jid)
                if jid in drop_at:
                    dropped.add(s)
            want.append(walk)
        assert [ids for ids in got if ids] == [ids for ids in want if ids]


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(_JOB, min_size=1, max_size=25), data=st.data())
def test_remembered_covers_is_covers(rows: list[tuple[str, int, int, int]],
                                     data: st.DataObject) -> None:
    """`FailSizes.covers_queue` answers from memory only while the pool's shapes are the same
    set: through adds, removes and new failures it says what `covers` says."""
    from gfs_opt.preempt.fit_memo import FailSizes

    jobs = _jobs(JobClass.HP, rows)
    q = PendingQueue(JobClass.HP)
    fails = {"A": FailSizes(), "B": FailSizes()}   # a pool's memo has its own
    waiting: set[int] = set()

    def check() -> None:
        for pool, f in fails.items():
            assert f.covers_queue(q, pool) == f.covers(q.shapes(pool))

    for j in jobs:
        q.add(j)
        waiting.add(j.id)
        check()
        for action in data.draw(st.lists(st.sampled_from(["remove", "fail"]), max_size=2)):
            if action == "remove" and waiting:
                gone = data.draw(st.sampled_from(sorted(waiting)))
                q.remove(gone)
                waiting.discard(gone)
            elif action == "fail":
                fails[data.draw(st.sampled_from(["A", "B"]))].add(
                    data.draw(st.sampled_from([250, 1000, 2000])), data.draw(st.integers(1, 3)))
            check()


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(_JOB, min_size=1, max_size=20), data=st.data())
def test_added_since_lists_the_jobs_queued_since_an_edit_count(
        rows: list[tuple[str, int, int, int]], data: st.DataObject) -> None:
    """What an LP pass is told from an earlier one by: the queue's edits count per pool, and the
    ids queued since a count — none (None) once a job of the pool has left the queue since."""
    jobs = _jobs(JobClass.LP, rows)
    q = PendingQueue(JobClass.LP)
    history: dict[str, list[tuple[int, int | None]]] = {"A": [], "B": []}  # (edits, id; None: left)
    for job in jobs:
        q.add(job)
        history[job.pool].append((q.edits(job.pool), job.id))
        if data.draw(st.booleans()):
            gone = data.draw(st.sampled_from([j.id for j in jobs[: job.id + 1] if j.id in q]))
            pool = jobs[gone].pool
            q.remove(gone)
            history[pool].append((q.edits(pool), None))
    for pool, events in history.items():
        counts = [e for e, _ in events]
        assert counts == list(range(1, len(events) + 1))   # every add and remove counts once
        for since in range(len(events) + 1):
            later = events[since:]
            expected = (None if any(jid is None for _, jid in later)
                        else [jid for _, jid in later])
            assert q.added_since(pool, since) == expected
