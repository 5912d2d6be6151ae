"""Background preparation of the next offloaded modules' weights."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch

from ..files._file_guard import OffloadedFileChangedError
from ..offload._prefetch_pool import (
    READ_CHUNK_BYTES,
    READER_THREADS,
    BufferPool,
    TensorSpan,
    advise_willneed,
    copy_into,
    fill,
    loader_of,
    memory_bytes,
    memory_plan,
    plan_bytes,
    read_plan,
)

if TYPE_CHECKING:
    from ._align_devices import AlignDevicesHook

_PAGE = 4096
DEFAULT_LAYERS_AHEAD = 16
"""Offloaded modules read ahead by default."""
DEFAULT_POOL_LAYERS = 3
"""Default pool bound, in sizes of the largest offloaded module."""


def touch_pages(tensor: torch.Tensor) -> None:
    """Reads one byte per page of a CPU tensor so a memory-mapped file is paged in now."""
    if tensor.device.type != "cpu" or tensor.numel() == 0 or not tensor.is_contiguous():
        return
    try:
        flat = tensor.reshape(-1).view(torch.uint8)
    except RuntimeError:
        return
    if flat.numel() > _PAGE:
        flat[::_PAGE].max()


def page_pieces(tensor: torch.Tensor) -> list[torch.Tensor]:
    """A contiguous CPU tensor's bytes, in the pieces one reader thread pages in at a time."""
    flat = tensor.reshape(-1).view(torch.uint8)
    return [flat[at : at + READ_CHUNK_BYTES] for at in range(0, len(flat), READ_CHUNK_BYTES)]


def _shutdown(executor: ThreadPoolExecutor, *others: ThreadPoolExecutor) -> None:
    """Stops the background threads (after their reads)."""
    executor.shutdown(wait=True, cancel_futures=True)
    for other in others:
        other.shutdown(wait=True)


class Prefetcher:
    """While an offloaded module runs, prepares the weights of the ones after it.

    Up to ``layers_ahead`` modules are prepared ahead, in execution order, by one background
    thread, as long as their weights fit in a pool of ``pool_bytes``; the first module that does
    not fit waits until a running module gives its share back (when its forward ends). Weights
    kept in an offload storage (safetensors or ``.dat`` offload files, or a registered storage)
    get a read-ahead hint (``posix_fadvise(WILLNEED)`` for files) when they enter the pool.
    On the CPU, weights of a file this process holds a read lease on (Linux) are views of the
    file's own pages, touched by the background thread; a writer of the file waits until those
    pages are moved into process memory (``accel_bigmodel.files._leased_map``). Other stored
    weights are read by the background threads into the pool's reusable buffers. Either way no
    module computes on a map of a file another process may shrink, so a file truncated during a
    forward is an [`OffloadedFileChangedError`][accel_bigmodel.OffloadedFileChangedError], not a SIGBUS. For a
    CUDA device the buffers are page-locked and copied to the device on a side stream. Weights
    held in memory (CPU offload) are prepared as before: pages touched on the CPU, a copy on an
    accelerator. The order wraps around, and each forward call starts the first modules at
    once; modules prepared without a pool buffer at the end of the previous forward are
    prepared again ([`refresh`][accel_bigmodel.Prefetcher.refresh]).

    Args:
        hooks: The offloading hooks, in the order they are expected to run (each forward then
            follows the order the previous one ran them in: `begin_forward`).
        layers_ahead: How many offloaded modules are prepared ahead of the running one.
        pool_bytes: The most bytes of weights read ahead from files held at once, the running
            module's included (default: three times the largest offloaded module read from a
            file). A module larger than the pool is read when it runs.
        cache_bytes: The most bytes of weights read from files left in the page cache between
            forwards. The modules within it (in execution order) stay cached; the pages of
            the ones after it are dropped from the page cache once their forward ends
            (`streamed`), so a disk part larger than memory streams through without pushing
            out the rest of the model. ``None``: no limit, every page stays where the kernel
            keeps it ([`attach_prefetcher`][accel_bigmodel.attach_prefetcher] sets it from
            the memory available).
    """

    def __init__(
        self,
        hooks: list[AlignDevicesHook],
        layers_ahead: int = DEFAULT_LAYERS_AHEAD,
        pool_bytes: int | None = None,
        cache_bytes: int | None = None,
    ) -> None:
        if isinstance(layers_ahead, bool) or not isinstance(layers_ahead, int) or layers_ahead < 1:
            raise ValueError(
                f"layers_ahead is how many offloaded modules are prepared ahead, an int >= 1; "
                f"got {layers_ahead!r}. Pass a positive int, or layers_ahead=0 to "
                "attach_prefetcher to turn prefetching off."
            )
        if cache_bytes is not None and (
            isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0
        ):
            raise ValueError(
                f"cache_bytes is the most bytes of file-read weights left in the page cache, "
                f"an int >= 0 or None (no limit); got {cache_bytes!r}."
            )
        self.hooks = hooks
        self.position = {id(h): i for i, h in enumerate(hooks)}
        self.layers_ahead = layers_ahead
        self.plans: dict[int, list[TensorSpan] | None] = {}
        for hook in hooks:
            self.plans[id(hook)] = read_plan(hook.weights_map, hook.offloaded_names)
        self.requested_pool_bytes = pool_bytes
        pinned = _pinned_target(hooks)
        largest = max((plan_bytes(p) for p in self.plans.values() if p), default=0)
        # Weights held in page-locked CPU memory (pin_offloaded_weights) go to the device
        # straight from there, on the side stream, without a pool buffer.
        self.direct: dict[int, list[tuple[str, torch.Tensor]]] = {}
        if pinned:
            # Other weights held in CPU memory go to the device through the pool's buffers too.
            for hook in hooks:
                if self.plans[id(hook)] is None:
                    held = memory_plan(hook.weights_map, hook.offloaded_names)
                    if held and all(tensor.is_pinned() for _, tensor in held):
                        self.direct[id(hook)] = held
                    largest = max(largest, memory_bytes(held) if held else 0)
        if pool_bytes is None:
            pool_bytes = DEFAULT_POOL_LAYERS * largest
        self.cache_bytes = cache_bytes
        self.streamed: set[int] = set()
        """The hooks (``id``) whose weights' pages are dropped from the page cache after their
        forward: those read from files past `cache_bytes`, in execution order."""
        self._plan_cache()
        # The modules run in the current forward, in the order of their first run (``id`` ->
        # hook): the next forward prepares them in that order (see `begin_forward`).
        self._observed: dict[int, AlignDevicesHook] = {}
        self.pool = BufferPool(pool_bytes, pin=pinned)
        self.pending: dict[int, tuple[Future, torch.Tensor | int | None]] = {}
        self.leased: dict[int, torch.Tensor | int] = {}
        # Stored weights are read into the pool's buffers (page-locked for an accelerator);
        # without them (False) each module's weights are read into new memory when prepared.
        self.read_into_buffers = True
        # Weights held in memory are copied into the pool's buffers only on their way to an
        # accelerator.
        self.stage_memory = self.pool.pin
        # Weights in files this process holds a read lease on are computed on in place, on the
        # file's own pages, when they run on the CPU (no copy; see files/_leased_map.py);
        # False reads every file into the pool's buffers.
        self.map_files = True
        self.mapped: set[int] = set()
        self.streams: dict[torch.device, Any] = {}
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accel-prefetch")
        # Reads into the pool's buffers are split among a few threads (started on first use):
        # one thread's copies out of the page cache cannot keep up with the bus.
        self.readers = ThreadPoolExecutor(
            max_workers=READER_THREADS, thread_name_prefix="accel-prefetch-read"
        )
        # Streamed modules' pages are dropped on a thread of their own: dropping pages waits on
        # the kernel's page lists, and must not hold up the reads of the next modules.
        self.evictor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accel-prefetch-drop")
        self.warm: list[torch.Tensor] = []
        """CPU weights held as maps of files (not offloaded), paged in by the readers when the
        next forward starts: a cold checkpoint is then read by several threads ahead of the
        compute, not a page at a time as the compute faults on it."""
        self.warming: list[Future] = []
        self._closed = False
        self.hits = 0
        self.misses = 0

    def _plan_cache(self) -> None:
        """Marks the modules past `cache_bytes` (in the order of `hooks`) as streamed."""
        self.streamed = set()
        if self.cache_bytes is None:
            return
        kept = 0
        for hook in self.hooks:
            plan = self.plans[id(hook)]
            if plan:
                kept += plan_bytes(plan)
                if kept > self.cache_bytes:
                    self.streamed.add(id(hook))

    def begin_forward(self) -> None:
        """Called when a forward of the model starts: adopts the order the previous forward
        ran its offloaded modules in, queues the pages of `warm` (the first forward only),
        prepares again what needs it (`refresh`), and starts preparing the first modules.

        The first forward prepares the modules in the model's module order, which is not
        always the order they run in (a transformers decoder layer registers its attention
        and MLP projections before the norms that run first). Prepared out of order, a module
        falls out of the read-ahead window before it runs, is read again when it runs, and the
        forward waits for the disk. Each forward after the first follows the order the one
        before it saw (the modules it did not run after the ones it ran).
        """
        with self.lock:
            observed, self._observed = self._observed, {}
            # The modules that did not run (an encoder skipped by later steps of ``generate``)
            # keep their places after the ones that did.
            order = [*observed.values(), *(h for h in self.hooks if id(h) not in observed)]
            if any(a is not b for a, b in zip(order, self.hooks)):
                self.hooks = order
                self.position = {id(h): i for i, h in enumerate(order)}
                self._plan_cache()
            warm, self.warm = self.warm, []
        # The weights held in memory run first in most device maps (the first layers fill the
        # memory budget), so their pages are queued before the offloaded modules' reads.
        pieces = [piece for tensor in warm for piece in page_pieces(tensor)]
        self.warming = [self.readers.submit(touch_pages, piece) for piece in pieces]
        self.refresh()
        self.schedule_after(None)

    def _prepare(self, hook: AlignDevicesHook) -> dict[str, torch.Tensor]:
        values = hook.fetch_weights()
        for tensor in values.values():
            touch_pages(tensor)
        return values

    def _read(
        self, hook: AlignDevicesHook, plan: list[TensorSpan], buffer: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        values = fill(plan, buffer, loader_of(hook.weights_map)[0], self.readers)
        return self._to_target(hook, values)

    def _mappable(self, hook: AlignDevicesHook, plan: list[TensorSpan]) -> bool:
        target = hook._target()
        if not self.map_files or (target is not None and target.type != "cpu"):
            return False
        return all(
            callable(getattr(span.storage, "can_map", None))
            and span.storage.can_map(span.stored.source)  # type: ignore[attr-defined]
            for span in plan
            if span.nbytes
        )

    def _map(self, hook: AlignDevicesHook, plan: list[TensorSpan]) -> dict[str, torch.Tensor]:
        """The weights of ``plan`` as views of their leased files (their pages touched now, and
        their CRC-32 checked once), or read into new memory when a lease was given up."""
        loader = loader_of(hook.weights_map)[0]
        values: dict[str, torch.Tensor] = {}
        pieces: list[torch.Tensor] = []
        for span in plan:
            stored = span.stored
            if stored.nbytes:
                span.storage.check(stored.source, stored.key or None)
            view = span.storage.mapped(stored) if stored.nbytes else None  # type: ignore[attr-defined]
            if view is None and stored.nbytes:
                return self._prepare(hook)
            if view is None:
                view = torch.empty(stored.shape, dtype=stored.dtype)
            if stored.nbytes:
                pieces += page_pieces(view)
            values[span.name] = view
        # Page the bytes in now, several pieces at once (a cold file is read as fast as the
        # pool's copies would read it), so the module's compute takes no page fault.
        if len(pieces) > 1:
            for _ in self.readers.map(touch_pages, pieces):
                pass
        elif pieces:
            touch_pages(pieces[0])
        if loader is not None:
            for span in plan:
                stored = span.stored
                if stored.nbytes:
                    loader.check_bytes(stored.key, stored.source, stored.start, values[span.name])
        return values

    def _stage(
        self, hook: AlignDevicesHook, held: list[tuple[str, torch.Tensor]], buffer: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        return self._to_target(hook, copy_into(held, buffer, self.readers))

    def _copy_pinned(
        self, hook: AlignDevicesHook, held: list[tuple[str, torch.Tensor]]
    ) -> dict[str, torch.Tensor]:
        return self._to_target(hook, dict(held))

    def _to_target(
        self, hook: AlignDevicesHook, values: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        """Weights read into a pool buffer, copied to a CUDA target on the side stream."""
        target = hook._target()
        if target is None or target.type != "cuda":
            return values
        stream = self.streams.get(target)
        if stream is None:
            stream = self.streams[target] = torch.cuda.Stream(device=target)
        with torch.cuda.stream(stream):
            moved = {name: t.to(target, non_blocking=True) for name, t in values.items()}
        stream.synchronize()  # the buffer may be reused only once the copy has read it
        return moved

    def take(self, hook: AlignDevicesHook) -> dict[str, Any] | None:
        """The prepared weights of ``hook`` (waiting for them if in flight), or ``None``.

        Raises:
            OffloadedFileChangedError: when the background thread found that a file of these
                weights changed under the model (named in the error).
        """
        with self.lock:
            self._observed.setdefault(id(hook), hook)
            entry = self.pending.pop(id(hook), None)
            self.mapped.discard(id(hook))
        if entry is None:
            self.misses += 1
            return None
        future, lease = entry
        try:
            result = future.result()
        except Exception as exc:
            if lease is not None:
                self.pool.give_back(lease)
            self.misses += 1
            if isinstance(exc, OffloadedFileChangedError):
                raise  # a file changed under the model: reading it again cannot help
            return None
        on_cpu = {tensor.device for tensor in result.values()} == {torch.device("cpu")}
        if lease is not None:
            if on_cpu:
                with self.lock:
                    self.leased[id(hook)] = lease
            else:
                self.pool.give_back(lease)  # the read-ahead buffer was copied to the device
        if not on_cpu:  # copied on the side stream, used on this one
            for tensor in result.values():
                if tensor.device.type == "cuda":
                    tensor.record_stream(torch.cuda.current_stream(tensor.device))
        self.hits += 1
        return result

    def release(self, hook: AlignDevicesHook) -> None:
        """``hook``'s module has put its weights away: its share of the pool is free again."""
        with self.lock:
            lease = self.leased.pop(id(hook), None)
        if lease is not None:
            self.pool.give_back(lease)
            self.schedule_after(hook)
        if id(hook) in self.streamed and not self._closed:
            plan = self.plans.get(id(hook))
            if plan:
                self.evictor.submit(self._evict, hook, plan)

    def _evict(self, hook: AlignDevicesHook, plan: list[TensorSpan]) -> None:
        """Drops a streamed module's pages from the page cache (unless it is being prepared
        again already: the order wrapped around)."""
        if id(hook) in self.pending:
            return
        for span in plan:
            evict = getattr(span.storage, "evict", None)
            if evict is not None and span.nbytes:
                try:
                    evict(span.stored)
                except OSError:
                    return  # a hint only: the pages stay

    def _window(self, hook: AlignDevicesHook | None) -> list[AlignDevicesHook]:
        index = -1 if hook is None else self.position.get(id(hook))
        if index is None:
            return []
        count = min(self.layers_ahead, len(self.hooks) - (hook is not None))
        return [self.hooks[(index + k) % len(self.hooks)] for k in range(1, count + 1)]

    def schedule_after(self, hook: AlignDevicesHook | None) -> None:
        """Starts preparing the modules that follow ``hook`` (``None``: the first ones).

        Modules are started in execution order while the pool has room; the first one that does
        not fit waits (with those after it) until a running module gives its share back.
        Modules prepared outside the window are dropped, except those up to ``layers_ahead``
        places before ``hook`` that have not run in this forward yet: ``hook`` ran before them
        although it comes after them in the order (a first forward in module order), so they
        run soon.
        """
        window = self._window(hook)
        if not window:
            return
        wanted = {id(h) for h in window}
        at = None if hook is None else self.position.get(id(hook))
        with self.lock:
            for key in [k for k in self.pending if k not in wanted]:
                if (
                    at is not None
                    and key not in self._observed
                    and 0 < at - self.position[key] <= self.layers_ahead
                ):
                    continue
                self._drop(self.pending.pop(key))
                self.mapped.discard(key)
            for following in window:
                key = id(following)
                if key in self.pending or key in self.leased or following.prefetcher is not self:
                    continue  # already under way, or its hook was removed from the model
                plan = self.plans.get(key)
                if key in self.direct:  # the pool counts their bytes in flight to the device
                    pinned = self.direct[key]
                    if not self.pool.reserve(memory_bytes(pinned)):
                        break
                    future = self.executor.submit(self._copy_pinned, following, pinned)
                    self.pending[key] = (future, memory_bytes(pinned))
                    continue
                if plan is None:
                    held = None
                    if self.stage_memory:
                        held = memory_plan(following.weights_map, following.offloaded_names)
                    if held is None or memory_bytes(held) > self.pool.capacity:
                        self.pending[key] = (self.executor.submit(self._prepare, following), None)
                        continue
                    buffer = self.pool.acquire(memory_bytes(held))
                    if buffer is None:
                        break
                    future = self.executor.submit(self._stage, following, held, buffer)
                    self.pending[key] = (future, buffer)
                    continue
                nbytes = plan_bytes(plan)
                if self._mappable(following, plan):  # computed on in place: no buffer
                    if not self.pool.reserve(nbytes):
                        break
                    advise_willneed(plan)
                    self.pending[key] = (self.executor.submit(self._map, following, plan), nbytes)
                    self.mapped.add(key)
                    continue
                lease: torch.Tensor | int | None
                if self.read_into_buffers:
                    lease = self.pool.acquire(nbytes)
                else:
                    lease = nbytes if self.pool.reserve(nbytes) else None
                if lease is None:
                    break
                advise_willneed(plan)
                if isinstance(lease, int):
                    future = self.executor.submit(self._prepare, following)
                else:
                    future = self.executor.submit(self._read, following, plan, lease)
                self.pending[key] = (future, lease)

    def refresh(self) -> None:
        """Prepares again, at the start of a forward, the modules prepared outside the pool's
        buffers (``read_into_buffers=False``) at the end of the previous one.

        The end of a forward prepares the first modules of the next one (the order wraps
        around); the model may then stay idle a long time. Reading those modules again on the
        background thread checks their files as they are now, so the forward computes on what
        the files hold when it starts. Weights read into the pool's own buffers, or held in
        memory, are left alone.
        """
        with self.lock:
            for key, (future, lease) in list(self.pending.items()):
                # An int lease: weights prepared outside the pool's buffers.
                if key in self.direct:
                    continue  # held in memory: nothing on a file to check again
                if not isinstance(lease, int) or not future.done() or future.cancelled():
                    continue
                hook = self.hooks[self.position[key]]
                plan = self.plans.get(key)
                if key in self.mapped and plan and self._mappable(hook, plan):
                    continue  # still leased: nobody wrote those files since
                self.mapped.discard(key)
                if plan:
                    advise_willneed(plan)
                self.pending[key] = (self.executor.submit(self._prepare, hook), lease)

    def _drop(self, entry: tuple[Future, torch.Tensor | int | None]) -> None:
        future, lease = entry
        if lease is None:
            future.cancel()
        elif future.cancel():
            self.pool.give_back(lease)
        else:
            future.add_done_callback(lambda _: self.pool.give_back(lease))

    def close(self) -> None:
        """Stops the background thread and drops the pool's buffers."""
        with self.lock:
            for entry in self.pending.values():
                entry[0].cancel()
            self.pending.clear()
            self.mapped.clear()
        if not self._closed:
            self._closed = True
            _shutdown(self.executor, self.readers, self.evictor)
        self.pool.clear()


def _pinned_target(hooks: list[AlignDevicesHook]) -> bool:
    if not torch.cuda.is_available():
        return False
    targets = {hook._target() for hook in hooks}
    return any(t is not None and t.type == "cuda" for t in targets)
