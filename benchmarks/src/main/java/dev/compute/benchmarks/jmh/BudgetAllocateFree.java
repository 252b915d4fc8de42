package dev.compute.benchmarks.jmh;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.Locale;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Allocate+free pairs through a memory budget against the manager's own pair, on the CPU backend, pooled, HOST:
 * {@code through=manager} is {@code manager.allocate(bytes, HOST)} then {@code close()}; {@code budget} the same
 * through a budget made by the manager, {@code child} through a budget under that one (two levels deep: the bytes count
 * in both). The budgets' limits are far above what a pair takes, so that none refuses: what is measured is what the
 * books cost a pair that fits. Leak detection {@code disabled} and {@code simple} (the default).
 *
 * <p>{@code handle}: {@code local}, the buffer never leaves the pair, so the JIT may take the manager's buffer off the
 * heap altogether (a budget cannot let it: it keeps each open buffer to close it should the tenant forget); or
 * {@code stored}, the buffer is stored before its close (in a slot of the thread's own, 128 bytes from any other
 * thread's, so that two threads storing do not share a cache line), as a service keeps the buffers it works on, so
 * that every path makes its buffer and the pairs differ by the budget's books alone.
 */
public class BudgetAllocateFree extends AllocateFreePairs {

    @Param({"manager", "budget", "child"})
    public String through;

    @Param({"disabled", "simple"})
    public String leakDetection;

    @Param({"local", "stored"})
    public String handle;

    private UnifiedMemoryManager manager;
    private MemoryBudget budget;
    private boolean store;
    /** Where a {@code stored} pair keeps its buffer until the next one: a slot per thread, 32 references (128 bytes) apart. */
    private final UnifiedBuffer[] kept = new UnifiedBuffer[64 * SLOT];
    private static final int SLOT = 32;

    @Setup(Level.Trial)
    public void open() {
        manager = UnifiedMemoryManager.builder().backend("cpu")
                .leakDetection(LeakDetectionLevel.valueOf(leakDetection.toUpperCase(Locale.ROOT))).build();
        budget = switch (through) {
            case "manager" -> null; // no budget at all: the manager's pair as it is without them
            case "budget" -> manager.budget("tenant", 1L << 30);
            case "child" -> manager.budget("tenant", 1L << 30).child("request", 1L << 30);
            default -> throw new IllegalArgumentException("through is 'manager', 'budget' or 'child', not '" + through + "'");
        };
        store = switch (handle) {
            case "local" -> false;
            case "stored" -> true;
            default -> throw new IllegalArgumentException("handle is 'local' or 'stored', not '" + handle + "'");
        };
    }

    @TearDown(Level.Trial)
    public void close() {
        manager.close();
    }

    @Override
    protected long pair(long bytes) {
        UnifiedBuffer buffer = budget == null ? manager.allocate(bytes, MemoryLocation.HOST) : budget.allocate(bytes, MemoryLocation.HOST);
        long size = buffer.byteSize();
        if (store) {
            kept[(int) (Thread.currentThread().threadId() & 63) * SLOT] = buffer;
        }
        buffer.close();
        return size;
    }
}
