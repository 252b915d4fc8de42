package dev.compute.memory.manager;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.BufferHost;
import dev.compute.memory.lifetime.HeldBy;
import dev.compute.memory.lifetime.ScopeRegistry;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.ComputeBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/** What a manager's buffers get of it ({@link BufferHost}): its gate, backend, chains, figures and block returns. */
public final class BufferServices implements BufferHost {

    private static final System.Logger LOG = ManagerLog.logger();
    /** The most lines one check of held memory says: buffers held alike past them are told of in the last. */
    private static final int MOST_WARNING_LINES = 10;
    /** How many of the threads holding the buffers of one line it names. */
    private static final int THREADS_NAMED = 5;

    private final CallGate gate;
    private final ComputeBackend backend;
    private final LocationChains chains;
    private final BlockAllocation allocation;
    private final Duration deviceWaitTimeout;
    private final Duration closeTimeout;
    private final Compactor compactor;
    private final BlockReturns returns;
    private final Map<Block, Held> held = new ConcurrentHashMap<>();
    /** How many entries {@link #held} has: the common free reads this one field, not the map's count cells. */
    private final AtomicInteger heldCount = new AtomicInteger();
    /** The host mirrors of open buffers: memory of the mirror location's pool, but no buffer anyone opened there. */
    private final Set<Block> openMirrors = ConcurrentHashMap.newKeySet();

    public BufferServices(CallGate gate, ComputeBackend backend, LocationChains chains, BlockAllocation allocation, Compactor compactor,
                   BlockReturns returns, Duration deviceWaitTimeout, Duration closeTimeout) {
        this.gate = gate;
        this.backend = backend;
        this.chains = chains;
        this.allocation = allocation;
        this.compactor = compactor;
        this.returns = returns;
        this.deviceWaitTimeout = deviceWaitTimeout;
        this.closeTimeout = closeTimeout;
    }

    @Override
    public int enter(BufferCore buffer) {
        return gate.enter(buffer);
    }

    @Override
    public int enterToEnd() {
        return gate.enterAlways();
    }

    @Override
    public void exit(int call) {
        gate.exit(call);
    }

    @Override
    public boolean isClosed() {
        return gate.isClosed();
    }

    @Override
    public ComputeBackend backend() {
        return backend;
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return chains.hostAccessible(location);
    }

    @Override
    public void count(Transfer transfer, MemoryLocation location, long bytes) {
        LocationChain chain = chains.of(location);
        switch (transfer) {
            case HOST_TO_DEVICE -> chain.hostToDevice.add(bytes);
            case DEVICE_TO_HOST -> chain.deviceToHost.add(bytes);
            case DEVICE_TO_DEVICE -> chain.deviceToDevice.add(bytes);
        }
    }

    @Override
    public ScopeRegistry scopes() {
        return gate.scopes();
    }

    @Override
    public Duration deviceWaitTimeout() {
        return deviceWaitTimeout;
    }

    /** The memory may be reused once this returns, so an interrupt does not cut the wait short. */
    @Override
    public void awaitDeviceIdle() {
        long deadline = System.nanoTime() + closeTimeout.toNanos();
        WaitThroughInterrupts waits = new WaitThroughInterrupts();
        boolean idle = waits.until(deadline, () -> backend.awaitIdle(Duration.ofNanos(Math.max(0, deadline - System.nanoTime()))));
        if (waits.interrupted()) {
            Thread.currentThread().interrupt();
        }
        if (!idle) {
            LOG.log(System.Logger.Level.WARNING, "device work was still running after " + closeTimeout.toMillis()
                    + " ms while a device access that could not record its work ended");
        }
    }

    @Override
    public Block allocateMirror(long bytes) {
        int stripe = gate.enterAlways();
        try {
            MemoryLocation at = chains.mirrorLocation();
            Block mirror = compactor.allocatingMirror(() -> allocation.block(chains.open(at), bytes, BlockAllocation.Failure.REPORT));
            openMirrors.add(mirror);
            return mirror;
        } catch (DeviceOutOfMemoryException e) {
            throw gate.closedDuring(e);
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Exception impossible) {
            throw new IllegalStateException(impossible);
        } finally {
            gate.exitQuietly(stripe);
        }
    }

    @Override
    public void held(BufferCore buffer, Block block, @Nullable Block mirror) {
        if (held.put(block, new Held(buffer, block, mirror, System.nanoTime())) == null) {
            heldCount.incrementAndGet();
        }
        if (mirror != null) { // after the held entry: a reader may count it out twice for a moment, never not at all
            openMirrors.remove(mirror);
        }
    }

    /**
     * The mirror's own entry is made before the block's goes with its free: a reader never finds the mirror in neither
     * (for a moment it may count it held twice: the safe side). It keeps the wait's start, and whether it was warned of.
     */
    @Override
    public void heldMirrorOnly(BufferCore buffer, Block block, Block mirror) {
        Held whole = held.get(block);
        Held mirrorOnly = new Held(buffer, null, mirror, whole != null ? whole.since : System.nanoTime());
        mirrorOnly.warned = whole != null && whole.warned;
        if (held.put(mirror, mirrorOnly) == null) {
            heldCount.incrementAndGet();
        }
    }

    @Override
    public void releaseMirror(Block mirror, CompletableFuture<?> inFlight) {
        Held entry = held.get(mirror);
        try {
            returns.releaseMirror(mirror, inFlight);
        } finally {
            if (entry != null && held.remove(mirror, entry)) {
                heldCount.decrementAndGet();
            }
        }
    }

    /**
     * A held block leaves the held figures only once its free is counted: a reader, who reads the held figures before
     * the live counts, then never finds a closed buffer's block in neither, so never counts it as live (for a moment
     * it may count it as held and freed both, a live buffer the fewer: the safe side). The entry, not the key, is
     * removed: the pool may lend the block again meanwhile, and that buffer's own entry stays.
     */
    @Override
    public void release(MemoryLocation location, Block block, @Nullable Block mirror, CompletableFuture<?> inFlight,
                        @Nullable Object budgetCount) {
        Held entry = heldCount.get() != 0 ? held.get(block) : null; // held memory is rare: the common free reads a count, not the map
        try {
            returns.release(location, block, mirror, inFlight, budgetCount);
        } finally {
            if (entry != null && held.remove(block, entry)) {
                heldCount.decrementAndGet();
            }
            if (mirror != null) { // once its free is counted, as a held block leaves the held figures
                openMirrors.remove(mirror);
            }
        }
    }

    /**
     * What closed buffers held by views, accesses or ops hold at {@code location} (mapped files apart): their blocks
     * there, and the host mirrors of held buffers elsewhere when this is the mirrors' location, since a mirror is a
     * block of that location's pool.
     */
    HeldFigures heldAt(MemoryLocation location) {
        long buffers = 0;
        long bytes = 0;
        long requested = 0;
        for (Held entry : held.values()) {
            for (Block block : entry.blocksAt(location, chains.mirrorLocation())) {
                buffers++;
                bytes += block.size();
                requested += block.requestedSize();
            }
        }
        return new HeldFigures(buffers, bytes, requested);
    }

    /**
     * How many host mirrors of open buffers lie at {@code location}: blocks of its pool that are no buffer. Read before
     * the live counts, as the held figures are: a mirror leaves this set only once its free is counted.
     */
    long openMirrorsAt(MemoryLocation location) {
        return location == chains.mirrorLocation() ? openMirrors.size() : 0;
    }

    /** Where the open buffers' mirrors at {@code location} lie, as {@link #heldPlaces} says it, to leave them out of the live buffers. */
    Set<String> openMirrorPlaces(MemoryLocation location) {
        Set<String> places = new HashSet<>();
        if (location == chains.mirrorLocation()) {
            for (Block mirror : openMirrors) {
                places.add(mirror.segment().address() + ":" + mirror.offset());
            }
        }
        return places;
    }

    /** Whether {@code block} is a closed buffer's that views, accesses or ops still hold. */
    boolean holds(Block block) {
        return heldCount.get() != 0 && held.containsKey(block);
    }

    /** Where the blocks held at {@code location} lie, as {@code segmentAddress:offset}, to mark them in a snapshot. */
    Set<String> heldPlaces(MemoryLocation location) {
        Set<String> places = new HashSet<>();
        for (Held entry : held.values()) {
            for (Block block : entry.blocksAt(location, chains.mirrorLocation())) {
                places.add(block.segment().address() + ":" + block.offset());
            }
        }
        return places;
    }

    /**
     * Warns, once per buffer, of memory a closed buffer has held for longer than {@code bound}, naming the threads whose
     * views or accesses hold it: a thread that took a view outside a view scope and has not called into the manager
     * since (an idle pool's thread), or an access nobody ended; or saying that a copy or op under way on it holds it.
     * Buffers held alike are told of in one line: a thread that viewed thousands of buffers and went idle would
     * otherwise write thousands. A check says {@value #MOST_WARNING_LINES} lines at most, the rest together in the
     * last: thousands of threads each viewing a buffer of its own (a service's virtual threads) would otherwise write a
     * line each. Where only such views hold the memory, its pages go back to the operating system then
     * ({@link #discardPages}), or at a later check, once only such views are left (an access or op ended meanwhile).
     */
    void warnAboutHeld(Duration bound) {
        long now = System.nanoTime();
        Map<HeldBy, List<Held>> byWait = new LinkedHashMap<>();
        List<Held> discardedLater = new ArrayList<>();
        for (Held entry : held.values()) {
            if (now - entry.since <= bound.toNanos()) {
                continue;
            }
            if (!entry.warned) {
                entry.warned = true;
                HeldBy waitingFor = entry.buffer.heldBy();
                if (!waitingFor.holders().isEmpty() || waitingFor.ops()) { // else nothing holds it now: on its way back
                    discardPages(entry);
                    byWait.computeIfAbsent(waitingFor, holders -> new ArrayList<>()).add(entry);
                }
            } else if (!entry.discardAnswered) {
                discardPages(entry);
                if (entry.discarded > 0) {
                    discardedLater.add(entry);
                }
            }
        }
        if (!discardedLater.isEmpty()) { // in one line, as a kernel that read thousands of them ends
            boolean one = discardedLater.size() == 1;
            long bytes = discardedLater.stream().mapToLong(entry -> entry.discarded).sum();
            LOG.log(System.Logger.Level.INFO, "the pages of " + (one ? "a closed " : discardedLater.size() + " closed buffers (")
                    + discardedLater.getFirst().buffer + (one ? " (" : " among them; ") + bytes + " bytes) went back to the operating"
                    + " system: only views taken outside any view scope hold " + (one ? "it" : "them") + " now, which read zeros from here on");
        }
        List<Map.Entry<HeldBy, List<Held>>> alike = new ArrayList<>(byWait.entrySet());
        int own = alike.size() > MOST_WARNING_LINES ? MOST_WARNING_LINES - 1 : alike.size();
        for (Map.Entry<HeldBy, List<Held>> each : alike.subList(0, own)) {
            warnOfHeld("", each.getKey(), each.getValue(), now);
        }
        if (own < alike.size()) {
            // one line for the rest (thousands of threads, each holding a buffer of its own), naming some of their threads
            List<Map.Entry<HeldBy, List<Held>>> rest = alike.subList(own, alike.size());
            List<Held> entries = rest.stream().flatMap(each -> each.getValue().stream()).toList();
            Set<String> holders = new LinkedHashSet<>();
            rest.forEach(each -> holders.addAll(each.getKey().holders()));
            HeldBy waitingFor = new HeldBy(List.copyOf(holders), rest.stream().anyMatch(each -> each.getKey().ops()),
                    rest.stream().anyMatch(each -> each.getKey().inOpenViewScopes()));
            warnOfHeld("more ", waitingFor, entries, now);
        }
    }

    /** One warning: {@code entries}, held by {@code waitingFor}, have waited long; {@code more} ("more "), the last line's. */
    private static void warnOfHeld(String more, HeldBy waitingFor, List<Held> entries, long now) {
        boolean one = entries.size() == 1;
        String waited = one ? "a closed " + entries.getFirst().buffer + " has waited "
                : entries.size() + " " + more + "closed buffers (" + entries.getFirst().buffer + " among them) have waited at least ";
        long bytes = entries.stream().mapToLong(Held::bytes).sum();
        long discarded = entries.stream().mapToLong(entry -> entry.discarded).sum();
        long shortestWait = entries.stream().mapToLong(entry -> now - entry.since).min().orElseThrow();
        String views = waitingFor.holders().isEmpty() ? "" : "views or accesses held by " + ThreadNames.some(waitingFor.holders(), THREADS_NAMED) + " to end";
        String ops = !waitingFor.ops() ? "" : (one ? "a copy or op under way on it" : "copies or ops under way on them") + " to return";
        String what = views.isEmpty() ? ops : ops.isEmpty() ? views : views + " and " + ops;
        String pages = discarded == 0 ? "" : (one ? " Its" : " Their") + " pages (" + discarded + " bytes) went back to the"
                + " operating system now; views of " + (one ? "it" : "them") + " read zeros from here on.";
        // the advice is for views and accesses: a copy or op under way returns by itself
        String advice = views.isEmpty() ? ""
                : waitingFor.inOpenViewScopes() ? " A view scope still open holds views of " + (one ? "it" : "them") + ": close each"
                        + " scope where it was opened (try-with-resources); a scope left open on a pool's thread takes the views"
                        + " of every later task there, unless each task runs in a scope of its own (ViewScope.wrap, or the"
                        + " starter's task decorator)."
                : " Take views inside a view scope (ViewScope.open(), or a web request or task with"
                        + " the starter), end accesses, or close buffers on the thread that views them.";
        LOG.log(System.Logger.Level.WARNING, waited + Duration.ofNanos(shortestWait).toMillis() + " ms for " + what + "; "
                + (one ? "its " : "their ") + bytes + " bytes go back to the pool only then." + pages + advice);
    }

    /**
     * Gives the pages of a closed buffer's host memory back to the operating system where only views taken outside any
     * view scope hold it, whose threads may idle for good: the pool cannot lend the range again while a view reaches
     * it, but nothing need stay in memory for views of a closed buffer. Counted as a call under way, so that the
     * manager's close frees nothing meanwhile; the buffer's monitor keeps its release waiting. Notes the bytes given
     * back in the entry. Once asked, the backend is not asked again for the same block: what it gives back depends on
     * the block and its kind of memory alone (none for pinned memory or under a page), so a buffer held for good would
     * otherwise cost its gate and monitor at every check. A backend's refusal (an exception) keeps the pages, told once:
     * thrown on, it would end every check before its warnings, the held memory of every buffer then never told of.
     */
    private void discardPages(Held entry) {
        int call = gate.enterAlways();
        try {
            if (!gate.isClosed()) {
                long discarded = entry.buffer.discardWhereOnlyIdleViewsHold(
                        block -> backend.discardPages(block.segment(), block.offset(), block.size()));
                if (discarded != BufferCore.NOT_NOW) {
                    entry.discarded = discarded;
                    entry.discardAnswered = true;
                }
            }
        } catch (RuntimeException refused) {
            entry.discardAnswered = true;
            LOG.log(System.Logger.Level.WARNING, "the backend refused to give the pages of a closed " + entry.buffer + " back to the"
                    + " operating system (" + refused + "); they stay in memory until its views end", refused);
        } finally {
            gate.exitQuietly(call);
        }
    }

    /** A closed buffer's block, and its host mirror if it has one, that views, accesses or ops still hold. */
    private static final class Held {
        final BufferCore buffer;
        /** Null once given back before the mirror (only views of the mirror held it). */
        final @Nullable Block block;
        final @Nullable Block mirror;
        final long since;
        volatile boolean warned;
        /** The bytes of its pages given back to the operating system past the bound; written by the warning's thread only. */
        long discarded;
        /** Whether the backend was asked for them (or refused, throwing): not asked again. Written by the warning's thread only. */
        boolean discardAnswered;

        Held(BufferCore buffer, @Nullable Block block, @Nullable Block mirror, long since) {
            this.buffer = buffer;
            this.block = block;
            this.mirror = mirror;
            this.since = since;
        }

        /** The bytes it holds: its block's and its mirror's. */
        long bytes() {
            return (block == null ? 0 : block.size()) + (mirror == null ? 0 : mirror.size());
        }

        /** Its pools' blocks at {@code location}: the buffer's own (a mapped file has figures of its own), its mirror's. */
        List<Block> blocksAt(MemoryLocation location, MemoryLocation mirrorLocation) {
            boolean own = block != null && buffer.location() == location && !(block instanceof MappedFile);
            boolean mirrored = mirror != null && mirrorLocation == location;
            if (own && mirrored) {
                return List.of(block, mirror);
            }
            return own ? List.of(block) : mirrored ? List.of(mirror) : List.of();
        }
    }

    /** The figures of held memory at one location. */
    record HeldFigures(long buffers, long bytes, long requestedBytes) {}
}
