package dev.compute.memory;

import dev.compute.memory.budget.BudgetAccount;
import dev.compute.memory.budget.BudgetLedger;
import dev.compute.memory.budget.BudgetNode;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.lifetime.BufferCore;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * A tenant's own allocator over a manager's pools, as Arrow's child allocators: buffers allocated through it come
 * from the manager's pools (no memory of its own, no second cache) but count against its limits and in its figures,
 * and in those of every budget above it. Made by {@link UnifiedMemoryManager#budget(BudgetSpec)} or
 * {@link #child(BudgetSpec)}; in Spring, from {@code compute.budgets.*} or per request (see the starter's README).
 *
 * <pre>{@code
 * try (MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant-a", 1L << 30).withReservation(DEVICE, 256L << 20));
 *      MemoryBudget request = tenant.child("request-42", 64L << 20)) {
 *     UnifiedBuffer input = request.allocate(FLOAT32, n, DEVICE);   // counts in request-42 and in tenant-a
 *     ...
 * }                                                                 // closes what the request forgot, and says so
 * }</pre>
 *
 * <p><b>Every allocation form.</b> {@code allocate} and {@code tryAllocate} as the manager's; {@code allocateAsync}
 * waits first for room in this budget (and those above it), in the order requests came, then for the pool's room as
 * the manager's does, within one timeout; {@code allocateBatch} is all or none against the budget as against the
 * pool; {@code mapFile} maps as the manager does and counts the mapping apart ({@link BudgetStatistics#mappedFiles()}),
 * against no limit. Slices and views of a budget's buffer share its memory and count nothing more.
 *
 * <p><b>What counts.</b> The bytes each buffer asked for, from when the budget lets it in until its memory goes back to
 * the pool (after {@code close()}, once views and device work on it have ended), at the budget allocated through and at
 * every budget above it (see the core's README for requests under way). A request that would pass a limit fails with {@link BudgetExceededException} (reason
 * {@link OutOfMemoryReason#BUDGET_LIMIT}), which says which budget refused and what it holds, and takes nothing from
 * the pool; the manager's listeners hear of it as of any out-of-memory.
 *
 * <p><b>Reservations.</b> Bytes a budget reserves at a location ({@link BudgetSpec#withReservation}) count in its
 * parent as held from the start, and for a root against the location's cap, which all roots share: a budget that would
 * take memory another budget reserved and does not use is refused, so a noisy tenant cannot starve a reserved one, and
 * reservations that do not fit are refused as the budget is made, as are those the pool's memory cannot keep as it is
 * made (memory held in whole segments and pages, whatever their buffers ask for). This is accounting above the pool: memory allocated
 * through the manager outside any budget, and host mirrors of device buffers, are no budget's; and the pool may still
 * need its out-of-memory recovery (releasing its cache, compacting) to place a reserved request among other tenants'
 * buffers.
 *
 * <p><b>Closing.</b> {@link #close()} closes the budgets under it first, refuses further requests, fails those
 * waiting, gives its reservation back and closes every buffer still open through it or a budget under it, saying in
 * the log which budget held how many (a request that forgot a buffer shows here). Thread-safe.
 */
public final class MemoryBudget implements AutoCloseable {

    private static final System.Logger LOG = ManagerLog.logger();
    /** How often a close looks again for the buffer of a request under way: 0.1 ms. */
    private static final long AWAIT_STEP_NANOS = 100_000;

    /** What a budget still held open as it closed: {@code buffers} buffers (mapped files among them) of {@code bytes} bytes. */
    public record Leftover(String budget, int buffers, long bytes) {}

    private final PooledMemoryManager manager;
    private final BudgetLedger<BufferCore> ledger;
    private final BudgetAccount<BufferCore> account;
    private final BudgetSpec spec;
    private final @Nullable MemoryBudget parent;
    private final BudgetAllocations allocations;
    /** What {@link #whenClosed} was given, until the budget closes and runs it; guarded by itself. */
    private final List<Runnable> whenClosed = new ArrayList<>();
    private boolean whenClosedRan;

    MemoryBudget(PooledMemoryManager manager, BudgetLedger<BufferCore> ledger, @Nullable MemoryBudget parent, BudgetSpec spec) {
        this.manager = manager;
        this.ledger = ledger;
        this.parent = parent;
        this.spec = spec;
        this.account = ledger.open(parent == null ? null : parent.account, spec);
        this.allocations = new BudgetAllocations(manager, ledger, account);
        // whole before a close can see it: a close of the parent or the manager that came since closed it, unseen
        if (!ledger.attach(account, this)) {
            throw new IllegalStateException(parent == null ? "this UnifiedMemoryManager is closed"
                    : "memory budget '" + parent.path() + "' is closed: no budget can be made under it");
        }
        try {
            keepTheMemoryToReserve();
        } catch (RuntimeException | Error refused) {
            closeAndReport(); // it holds nothing yet: its reservation goes back
            throw refused;
        }
        if (!spec.reservations().isEmpty()) { // the pool keeps memory apart for it until then
            whenClosed(() -> manager.reservationEnded(account));
        }
    }

    /**
     * Has the pool keep room for each reservation the books accepted (a child's in the room of a reserving budget above
     * it, which grows where the children's reservations together pass the parent's), or refuses it where the pool's
     * memory cannot keep it now: the books count the bytes buffers ask for, while the pool holds memory in whole segments
     * and pages, so beside a neighbour's buffer in a segment larger than it the cap leaves less than the books do. Until
     * then the pool keeps no room for it, so that a reservation refused here takes none from those that stand.
     */
    private void keepTheMemoryToReserve() {
        ledger.reservationsAwaitingThePool(account).forEach((location, bytes) -> {
            long shortfall = manager.keepAsideWhereItFits(location, () -> ledger.keptByThePool(account, location, true),
                    () -> ledger.keptByThePool(account, location, false));
            if (shortfall > 0) {
                throw new BudgetReservationException(location, bytes, "memory budget '" + path() + "' cannot reserve " + bytes + " bytes of "
                        + location + ": the pool there holds memory in whole segments and pages, more than its buffers ask for, and"
                        + " beside what it holds and the budgets' reservations keep, its cap (" + ManagerSettings.capPropertyOf(location)
                        + ") is " + shortfall + " bytes short, even with its cache given back; make reserving budgets before other"
                        + " tenants allocate, reserve less, or raise the cap");
            }
        });
    }

    /** Its name among its siblings. */
    public String name() {
        return spec.name();
    }

    /** Its name after its ancestors', joined by {@code '/'}: {@code tenant-a/request-42}. */
    public String path() {
        return account.path();
    }

    public BudgetSpec spec() {
        return spec;
    }

    public long limitBytes() {
        return spec.limitBytes();
    }

    /** The budget it was made under; empty for one made by the manager. */
    public Optional<MemoryBudget> parent() {
        return Optional.ofNullable(parent);
    }

    /** The budgets made under it and not yet closed, in the order they were made. */
    public List<MemoryBudget> children() {
        return ledger.children(account).stream().map(MemoryBudget.class::cast).toList();
    }

    /** A budget of {@code limitBytes} under this one, reserving nothing. */
    public MemoryBudget child(String name, long limitBytes) {
        return child(BudgetSpec.of(name, limitBytes));
    }

    /**
     * A budget under this one: what it holds or reserves counts in this budget too, against this budget's limits.
     *
     * @throws BudgetReservationException a reservation of the child does not fit beside what this budget and those above
     *                                    it hold and reserve
     * @throws IllegalStateException      this budget is closed, or 100 levels deep already (budgets nest at most 100 levels)
     */
    public MemoryBudget child(BudgetSpec childSpec) {
        return new MemoryBudget(manager, ledger, this, childSpec);
    }

    // ---- allocation -------------------------------------------------------------------------------------------------

    /** {@code bytes} bytes at the manager's default location. */
    public UnifiedBuffer allocate(long bytes) {
        return allocate(bytes, manager.defaultLocation());
    }

    public UnifiedBuffer allocate(long bytes, MemoryLocation location) {
        return allocate(DataType.INT8, bytes, location);
    }

    /** {@code count} elements of {@code type} at the manager's default location. */
    public UnifiedBuffer allocate(DataType type, long count) {
        return allocate(type, count, manager.defaultLocation());
    }

    /**
     * As {@link UnifiedMemoryManager#allocate(DataType, long, MemoryLocation)}, counted in this budget.
     *
     * @throws BudgetExceededException where this budget, one above it or the reservations of others leave no room
     * @throws IllegalStateException   where the budget is closed, or closes while the allocation is under way
     */
    public UnifiedBuffer allocate(DataType type, long count, MemoryLocation location) {
        return allocations.allocate(type, count, location);
    }

    /** As {@link #allocate(long)}, but empty where this budget or the pool has no room for it (bad arguments still throw). */
    public Optional<UnifiedBuffer> tryAllocate(long bytes) {
        return tryAllocate(DataType.INT8, bytes, manager.defaultLocation());
    }

    public Optional<UnifiedBuffer> tryAllocate(long bytes, MemoryLocation location) {
        return tryAllocate(DataType.INT8, bytes, location);
    }

    public Optional<UnifiedBuffer> tryAllocate(DataType type, long count) {
        return tryAllocate(type, count, manager.defaultLocation());
    }

    /** As {@link #allocate(DataType, long, MemoryLocation)}, but empty where it would throw {@link DeviceOutOfMemoryException}. */
    public Optional<UnifiedBuffer> tryAllocate(DataType type, long count, MemoryLocation location) {
        try {
            return Optional.of(allocate(type, count, location));
        } catch (DeviceOutOfMemoryException e) {
            return Optional.empty();
        }
    }

    public CompletableFuture<UnifiedBuffer> allocateAsync(long bytes, Duration timeout) {
        return allocateAsync(DataType.INT8, bytes, manager.defaultLocation(), timeout);
    }

    public CompletableFuture<UnifiedBuffer> allocateAsync(long bytes, MemoryLocation location, Duration timeout) {
        return allocateAsync(DataType.INT8, bytes, location, timeout);
    }

    public CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, Duration timeout) {
        return allocateAsync(type, count, manager.defaultLocation(), timeout);
    }

    /**
     * {@code count} elements of {@code type}, now or once memory comes back, within {@code timeout}: first room in this
     * budget and those above it (requests waiting in this budget are served in the order they came, as
     * {@link UnifiedMemoryManager#allocateAsync(long, MemoryLocation, Duration)} serves a location's queue), then, with
     * the bytes counted here, the pool's room, through the manager's queue, for what is left of the timeout. The future
     * fails at once for a request larger than this budget could ever hold, with {@link BudgetExceededException} when
     * the wait for the budget's room times out, as the manager's fails when the wait for the pool's does, and with
     * {@link IllegalStateException} when the budget or the manager closes. Cancelling it, or completing it otherwise
     * (as {@code orTimeout} does), withdraws the request wherever it waits, and gives its bytes back in this budget,
     * before the functions added to the future run; where the pool is trying to serve it at that moment, its bytes go
     * back once that attempt ends (a buffer it made closed again, not lost), without the cancel waiting for it.
     */
    public CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, MemoryLocation location, Duration timeout) {
        return allocations.allocateAsync(type, count, location, timeout);
    }

    public List<UnifiedBuffer> allocateBatch(DataType type, long[] counts) {
        return allocateBatch(type, counts, manager.defaultLocation());
    }

    /**
     * As {@link UnifiedMemoryManager#allocateBatch(DataType, long[], MemoryLocation)}, all or none against this
     * budget too: the batch's bytes are checked together, and a refusal takes nothing from the pool.
     */
    public List<UnifiedBuffer> allocateBatch(DataType type, long[] counts, MemoryLocation location) {
        return allocations.allocateBatch(type, counts, location);
    }

    /** As {@link UnifiedMemoryManager#mapFile(Path, DataType, FileMapMode)}, counted apart in this budget. */
    public UnifiedBuffer mapFile(Path file, DataType type, FileMapMode mode) throws IOException {
        return allocations.mapFile(file, type, mode, 0, null);
    }

    /**
     * As {@link UnifiedMemoryManager#mapFile(Path, DataType, FileMapMode, long, long)}: the mapping is counted in this
     * budget's {@link BudgetStatistics#mappedFiles()} and {@link BudgetStatistics#mappedBytes()} until it is unmapped,
     * against no limit (a mapped file is no pooled memory), and closed with the budget.
     */
    public UnifiedBuffer mapFile(Path file, DataType type, FileMapMode mode, long byteOffset, long byteLength) throws IOException {
        if (byteLength <= 0) {
            throw new IllegalArgumentException("a mapping's length must be positive: " + byteLength + " bytes");
        }
        return allocations.mapFile(file, type, mode, byteOffset, byteLength);
    }

    // ---- figures and close ------------------------------------------------------------------------------------------

    public BudgetStatistics statistics() {
        return ledger.statistics(account);
    }

    public boolean isClosed() {
        return ledger.isClosed(account);
    }

    /**
     * Runs {@code action} once this budget has closed: by its own close, a close of a budget above it or the manager's,
     * on the closing thread, after the buffers it held were closed; at once where it has closed already. For an observer
     * that drops what it keeps of the budget (the starter's meters of a tenant). What the action throws is logged, and
     * the close goes on.
     */
    public void whenClosed(Runnable action) {
        synchronized (whenClosed) {
            if (!whenClosedRan) {
                whenClosed.add(action);
                return;
            }
        }
        runClosed(action);
    }

    /** Runs what {@link #whenClosed} was given, once: the budget has closed. */
    void closed() {
        List<Runnable> actions;
        synchronized (whenClosed) {
            if (whenClosedRan) {
                return;
            }
            whenClosedRan = true;
            actions = List.copyOf(whenClosed);
            whenClosed.clear();
        }
        actions.forEach(this::runClosed);
    }

    private void runClosed(Runnable action) {
        UserCode.enter();
        try {
            action.run();
        } catch (Throwable e) {
            // an Error too: the budget is closed whatever an observer of it does; named by its class, as listeners are
            LOG.log(System.Logger.Level.WARNING, "an action of memory budget '" + path() + "' on its close (" + action.getClass().getName()
                    + ") failed", e);
        } finally {
            UserCode.exit();
        }
    }

    /**
     * Closes this budget and those under it, reporting in the log, for each, the buffers still open that it closes;
     * closing twice is harmless. See {@link #closeAndReport()}.
     */
    @Override
    public void close() {
        Closed closed = closeAll();
        for (Leftover left : closed.leftovers()) {
            LOG.log(System.Logger.Level.WARNING, "memory budget '" + left.budget() + "' closed with " + left.buffers() + " buffer(s) of "
                    + left.bytes() + " bytes still open; closing them now");
        }
        closed.rethrow();
    }

    /**
     * Closes this budget and those under it (the deepest first): each refuses further requests, fails those waiting and
     * gives its reservation back; then every buffer still open through them is closed. Returns, for each budget that
     * held any, how many and how large, logging nothing: for a caller that reports them its own way (a request scope).
     * A buffer closed already whose memory waits for a view is not counted: it was closed. What a buffer's close throws
     * (an application's resource adaptor may throw anything) comes after all are closed. Closing twice returns nothing.
     */
    public List<Leftover> closeAndReport() {
        Closed closed = closeAll();
        closed.rethrow();
        return closed.leftovers();
    }

    /** What a close left, and the first failure of a buffer's close (the others added to it). */
    private record Closed(List<Leftover> leftovers, @Nullable Throwable failure) {
        void rethrow() {
            if (failure instanceof RuntimeException unchecked) {
                throw unchecked;
            }
            if (failure instanceof Error error) {
                throw error;
            }
        }
    }

    private Closed closeAll() {
        List<MemoryBudget> closedBudgets = new ArrayList<>();
        List<BudgetLedger.Open<BufferCore>> open = ledger.close(account, handle -> {
            MemoryBudget budget = (MemoryBudget) handle;
            budget.allocations.budgetClosed();
            closedBudgets.add(budget);
        });
        manager.budgetClosed();
        // per budget, not per path: siblings may share a name (every request's child called "request")
        Map<BudgetAccount<BufferCore>, Leftover> left = new LinkedHashMap<>();
        List<BufferCore> closing = new ArrayList<>();
        long deadline = 0;
        for (BudgetLedger.Open<BufferCore> each : open) {
            BufferCore buffer = each.buffer();
            BudgetNode<BufferCore> underWay = each.node();
            if (buffer == null && underWay != null) {
                // a request under way in the pool: its caller hears that the budget closed; its buffer, once it comes, is closed here
                if (deadline == 0) {
                    deadline = System.nanoTime() + manager.settings().closeTimeout().toNanos();
                }
                BufferCore coming = awaitBuffer(underWay, deadline);
                if (coming != null) {
                    closing.add(coming);
                }
            } else if (buffer != null && !buffer.isClosed()) {
                closing.add(buffer);
                left.merge(each.account(), new Leftover(each.budget(), 1, each.bytes()),
                        (sum, one) -> new Leftover(sum.budget(), sum.buffers() + 1, sum.bytes() + one.bytes()));
            }
        }
        Throwable failure = null;
        for (BufferCore buffer : closing) {
            try {
                buffer.close();
            } catch (Throwable e) {
                if (failure == null) {
                    failure = e;
                } else {
                    UserCode.suppress(failure, e); // an adaptor may throw one exception object every time
                }
            }
        }
        closedBudgets.forEach(MemoryBudget::closed);
        return new Closed(List.copyOf(left.values()), failure);
    }

    /**
     * The buffer of a request under way, once the pool gives it; null where the pool refused it (nothing to close), or
     * at {@code deadline} or an interrupt (kept): then the request sees the budget closed as it counts the buffer, and
     * closes it itself.
     */
    private @Nullable BufferCore awaitBuffer(BudgetNode<BufferCore> node, long deadline) {
        // an interrupt ends the wait, as it ends the pool's own: parkNanos returns at once while it is set, so the
        // close would otherwise spin until its timeout
        while (ledger.underWay(node) && System.nanoTime() - deadline < 0 && !Thread.currentThread().isInterrupted()) {
            LockSupport.parkNanos(AWAIT_STEP_NANOS);
        }
        return node.buffer();
    }

    @Override
    public String toString() {
        BudgetStatistics figures = statistics();
        return "MemoryBudget[" + figures.name() + ", " + figures.allocatedBytes() + " of " + figures.limitBytes() + " bytes]";
    }
}
