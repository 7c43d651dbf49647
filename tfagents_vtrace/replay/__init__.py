"""Replay buffers: ACER's episodic sequences and TAAC's sequence windows.

Both save to numpy archives with a checksum next to each checkpoint (never pickle), see
:mod:`tfagents_vtrace.replay.storage`; a corrupted archive raises
:class:`~tfagents_vtrace.replay.storage.ReplayCorruptError` instead of loading.
"""
