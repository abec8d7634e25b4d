"""Claims of the units a running ``compare`` is computing (owner host, pid, lease), so that a
second run on the same store skips them: a claim of a dead owner (same host, pid gone) or past
its lease is taken over.  :class:`Claims` is a part of :class:`~mtlbench.store.ResultStore`.
"""
from __future__ import annotations

import os
import socket
import sqlite3
import time
from typing import Iterable, Mapping

from .diagnosis import StoreError, _cause

CLAIM_LEASE_SECONDS = 3600.0


class Claims:
    """The claim methods of :class:`~mtlbench.store.ResultStore` (its connection ``_conn``,
    ``owner``, ``path`` and ``readonly``)."""

    def claim_units(self, keys: Iterable[str], seen: Mapping[str, tuple] | None = None
                    ) -> tuple[set[str], set[str]]:
        """Claim ``keys`` for this process, in one transaction that also re-reads the units:
        returns (the keys now claimed by it, the keys another run wrote meanwhile).

        ``seen`` is what the caller read when it chose the keys (:meth:`unit_states`; a key
        absent from it was not in the store).  A key whose stored (status, finished_at) is no
        longer what the caller saw was written by another run since (finished, or recomputed
        by another ``--rerun``): it is not claimed.  Nor is a key another live run holds.  So
        two runs on one store never compute the same unit.  Claims of a dead owner on this
        host, or past their lease (another host), are taken over."""
        keys = list(keys)
        if self.readonly or not keys:
            return set(keys), set()
        seen = seen or {}
        host, now = socket.gethostname(), time.time()
        mine: set[str] = set()
        alive: dict[int, bool] = {}
        try:
            with self._conn:
                self._conn.execute("BEGIN IMMEDIATE")
                held, status = {}, {}
                for i in range(0, len(keys), 500):
                    chunk = keys[i:i + 500]
                    marks = ", ".join("?" * len(chunk))
                    held.update({r[0]: r[1:] for r in self._conn.execute(
                        f"SELECT key, owner, host, pid, expires FROM claims WHERE key IN "
                        f"({marks})", chunk)})
                    status.update({r[0]: tuple(r[1:]) for r in self._conn.execute(
                        f"SELECT key, status, finished_at FROM units WHERE key IN ({marks})",
                        chunk)})
                finished = {k for k in keys if status.get(k) != seen.get(k)}
                rows = []
                for k in keys:
                    if k in finished:
                        continue
                    h = held.get(k)
                    if h is not None and h[0] != self.owner and h[3] > now:
                        if h[1] != host:
                            continue
                        if h[2] not in alive:
                            alive[h[2]] = _pid_alive(h[2])
                        if alive[h[2]]:
                            continue
                    rows.append((k, self.owner, host, os.getpid(), now + CLAIM_LEASE_SECONDS))
                    mine.add(k)
                self._conn.executemany("INSERT OR REPLACE INTO claims (key, owner, host, pid, "
                                       "expires) VALUES (?, ?, ?, ?, ?)", rows)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot claim units in the results store {str(self.path)!r}: "
                             f"{_cause(self.path, exc)}") from None
        self._renewed = now
        return mine, finished

    def renew_claims(self, every: float = 60.0) -> None:
        """Extend this process's claims (at most once per ``every`` seconds)."""
        now = time.time()
        if self.readonly or now - self._renewed < every:
            return
        with self._conn:
            self._conn.execute("UPDATE claims SET expires = ? WHERE owner = ?",
                               (now + CLAIM_LEASE_SECONDS, self.owner))
        self._renewed = now

    def release_claims(self, keys: Iterable[str] | None = None) -> None:
        """Drop this process's claims (all, or ``keys``)."""
        if self.readonly:
            return
        try:
            with self._conn:
                if keys is None:
                    self._conn.execute("DELETE FROM claims WHERE owner = ?", (self.owner,))
                else:
                    self._conn.executemany("DELETE FROM claims WHERE key = ? AND owner = ?",
                                           [(k, self.owner) for k in keys])
        except sqlite3.Error as exc:
            raise StoreError(f"cannot update the results store {str(self.path)!r}: "
                             f"{_cause(self.path, exc)}") from None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True

