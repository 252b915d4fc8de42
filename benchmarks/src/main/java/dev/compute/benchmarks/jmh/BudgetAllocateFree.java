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
 */
public class BudgetAllocateFree extends AllocateFreePairs {

    @Param({"manager", "budget", "child"})
    public String through;

    @Param({"disabled", "simple"})
    public String leakDetection;

    @Param({"kept", "escaping"})
    public String handle;

    private UnifiedBuffer last;

    private UnifiedMemoryManager manager;
    private MemoryBudget budget;

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
    }

    @TearDown(Level.Trial)
    public void close() {
        manager.close();
    }

    @Override
    protected long pair(long bytes) {
        UnifiedBuffer buffer = through.equals("manager") ? manager.allocate(bytes, MemoryLocation.HOST) : budget.allocate(bytes, MemoryLocation.HOST);
        long size = buffer.byteSize();
        if (handle.equals("escaping")) {
            last = buffer;
        }
        buffer.close();
        return size;
    }
}
