"""Imported first by the worker pools' fork server (`engines.PRELOAD`), and only there: the fork
server and the workers it forks ignore SIGINT and SIGTERM.

A signal to the whole process group (Ctrl-C in a terminal, a batch system's SIGTERM) then reaches
the parent alone, which stops its workers itself and exits; the fork server ends when the parent
does (its pipe closes). Left at the default, a fork server killed by the group's SIGTERM breaks
the pool under the parent while it is still deciding what to keep.
"""

from gfs_opt.interrupts import worker_signals

worker_signals()
