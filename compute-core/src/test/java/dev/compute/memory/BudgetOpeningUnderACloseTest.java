package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.Breakpoint;
import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A budget being made while the budget above it, or the manager, closes on another thread: held, as by a debugger, after
 * the books opened it and before its handle is whole. The close must close everything and return; the budget being made
 * is refused as made under a closed parent, never handed out half told.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class BudgetOpeningUnderACloseTest {

    private static final long MiB = 1L << 20;

    @Test
    void aParentsCloseUnderAChildsMakingClosesAllAndTheChildIsRefused() throws Exception {
        ChildJvm.Result result = ChildJvm.runDebuggable(Duration.ofSeconds(120), ParentClosedUnderAChildsMaking.class);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe())
                .contains("the tenant's close: returned")
                .contains("the tenant's buffer closed: true")
                .contains("the child: java.lang.IllegalStateException: memory budget 'tenant' is closed: no budget can be made under it");
    }

    @Test
    void theManagersCloseUnderABudgetsMakingRefusesTheBudget() throws Exception {
        ChildJvm.Result result = ChildJvm.runDebuggable(Duration.ofSeconds(120), ManagerClosedUnderABudgetsMaking.class);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe())
                .contains("the manager's close: returned")
                .contains("the budget: java.lang.IllegalStateException: this UnifiedMemoryManager is closed");
    }

    private static UnifiedMemoryManager manager() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).closeTimeout(Duration.ofSeconds(2)).build();
    }

    /** What {@code making} gave: the budget, or what it threw; and, for a budget, whether its close actions ran. */
    private static String made(AtomicReference<Object> making) {
        if (making.get() instanceof MemoryBudget budget) {
            CountDownLatch told = new CountDownLatch(1);
            budget.whenClosed(told::countDown);
            return "made, closed " + budget.isClosed() + ", its close actions run: " + (told.getCount() == 0);
        }
        return String.valueOf(making.get());
    }

    static final class ParentClosedUnderAChildsMaking {
        public static void main(String[] args) throws Exception {
            try (UnifiedMemoryManager manager = manager()) {
                MemoryBudget tenant = manager.budget("tenant", 32 * MiB);
                tenant.child("first", MiB).close(); // loads what the breakpoint names
                UnifiedBuffer held = tenant.allocate(MiB, MemoryLocation.DEVICE);
                AtomicReference<Object> making = new AtomicReference<>();
                try (Breakpoint breakpoint = Breakpoint.at(BudgetAllocations.class, "<init>", 1, "opening")) {
                    Thread opening = Thread.ofPlatform().name("opening").start(() -> {
                        try {
                            making.set(tenant.child(BudgetSpec.of("request", 8 * MiB).withReservation(MemoryLocation.DEVICE, 4 * MiB)));
                        } catch (Throwable t) {
                            making.set(t);
                        }
                    });
                    breakpoint.awaitHit(60);
                    try {
                        tenant.close();
                        System.out.println("the tenant's close: returned");
                    } catch (Throwable t) {
                        System.out.println("the tenant's close: threw " + t);
                    }
                    breakpoint.release();
                    opening.join();
                }
                System.out.println("the tenant's buffer closed: " + held.isClosed());
                System.out.println("the child: " + made(making));
            }
        }
    }

    static final class ManagerClosedUnderABudgetsMaking {
        public static void main(String[] args) throws Exception {
            UnifiedMemoryManager manager = manager();
            manager.budget("first", MiB).close(); // loads what the breakpoint names
            AtomicReference<Object> making = new AtomicReference<>();
            try (Breakpoint breakpoint = Breakpoint.at(BudgetAllocations.class, "<init>", 1, "opening")) {
                Thread opening = Thread.ofPlatform().name("opening").start(() -> {
                    try {
                        making.set(manager.budget(BudgetSpec.of("tenant", 8 * MiB).withReservation(MemoryLocation.DEVICE, 4 * MiB)));
                    } catch (Throwable t) {
                        making.set(t);
                    }
                });
                breakpoint.awaitHit(60);
                try {
                    manager.close();
                    System.out.println("the manager's close: returned");
                } catch (Throwable t) {
                    System.out.println("the manager's close: threw " + t);
                }
                breakpoint.release();
                opening.join();
            }
            System.out.println("the budget: " + made(making));
        }
    }
}
