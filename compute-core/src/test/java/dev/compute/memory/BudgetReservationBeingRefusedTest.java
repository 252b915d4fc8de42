package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.Breakpoint;
import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A reservation the books take but the pool's memory cannot keep is refused as its budget is made, a child's under a
 * reserving budget too; while it is being made, before the pool is asked, it must take no room from the reservations
 * that stand: a reserved tenant's request within its reservation is served then as at any other moment.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class BudgetReservationBeingRefusedTest {

    private static final long MiB = 1L << 20;

    @Test
    void aReservationBeingRefusedTakesNoRoomFromAReservedTenantMeanwhile() throws Exception {
        ChildJvm.Result result = ChildJvm.runDebuggable(Duration.ofSeconds(120), TenantAskingWhileAReservationIsMade.class);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe())
                .contains("the tenant's 16th MiB, while the other budget was being made: served")
                .contains("the other budget: refused by the pool: true");
    }

    @Test
    void aChildReservingPastItsReservingParentIsRefusedWhereThePoolCannotKeepTheDifference() {
        try (UnifiedMemoryManager manager = manager64();
             MemoryBudget parent = manager.budget(BudgetSpec.of("parent", 16 * MiB).withReservation(MemoryLocation.DEVICE, 4 * MiB))) {
            List<UnifiedBuffer> outside = fillThePool(manager);
            try {
                // the parent keeps 4 MiB; the child's 8 MiB would have it keep 8, which the pool, full beside it, cannot
                assertThatThrownBy(() -> parent.child(BudgetSpec.of("child", 8 * MiB).withReservation(MemoryLocation.DEVICE, 8 * MiB)))
                        .isInstanceOf(BudgetReservationException.class)
                        .hasMessageContaining("memory budget 'parent/child' cannot reserve 8388608 bytes of DEVICE")
                        .hasMessageContaining("compute.memory.pooling.max-pool-size");
                assertThat(parent.children()).isEmpty();
                // within the parent's room a child is kept as before
                try (MemoryBudget within = parent.child(BudgetSpec.of("within", 4 * MiB).withReservation(MemoryLocation.DEVICE, 4 * MiB))) {
                    for (int i = 0; i < 4; i++) {
                        outside.add(within.allocate(MiB, MemoryLocation.DEVICE));
                    }
                }
            } finally {
                outside.forEach(UnifiedBuffer::close);
            }
        }
    }

    @Test
    void aChildReservingPastItsReservingParentGetsAllOfItBesideANeighbourFillingThePoolAfter() {
        try (UnifiedMemoryManager manager = manager64();
             MemoryBudget parent = manager.budget(BudgetSpec.of("parent", 16 * MiB).withReservation(MemoryLocation.DEVICE, 4 * MiB));
             MemoryBudget child = parent.child(BudgetSpec.of("child", 8 * MiB).withReservation(MemoryLocation.DEVICE, 8 * MiB))) {
            List<UnifiedBuffer> held = fillThePool(manager);
            try {
                for (int i = 0; i < 8; i++) {
                    held.add(child.allocate(MiB, MemoryLocation.DEVICE));
                }
            } finally {
                held.forEach(UnifiedBuffer::close);
            }
        }
    }

    private static UnifiedMemoryManager manager64() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO)
                .maxPoolSize(64 * MiB).build();
    }

    /** Memory outside any budget, 1 MiB at a time, until the pool refuses: buffers to close. */
    private static List<UnifiedBuffer> fillThePool(UnifiedMemoryManager manager) {
        List<UnifiedBuffer> held = new ArrayList<>();
        for (Optional<UnifiedBuffer> more; (more = manager.tryAllocate(MiB, MemoryLocation.DEVICE)).isPresent(); ) {
            held.add(more.get());
        }
        return held;
    }

    /**
     * A tenant reserving 16 MiB of a 64 MiB pool and holding 15 of it; a neighbour holding all the pool lets it hold
     * beside that; another budget reserving what the books leave (which the pool's memory, held in whole segments, cannot
     * keep), held, as by a debugger, after the books took it and before the pool is asked, while the tenant asks for the
     * last MiB of its reservation.
     */
    static final class TenantAskingWhileAReservationIsMade {
        public static void main(String[] args) throws Exception {
            try (UnifiedMemoryManager manager = manager64();
                 MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant", 16 * MiB).withReservation(MemoryLocation.DEVICE, 16 * MiB));
                 MemoryBudget neighbour = manager.budget("neighbour", 64 * MiB)) {
                List<UnifiedBuffer> held = new ArrayList<>();
                for (Optional<UnifiedBuffer> more; (more = neighbour.tryAllocate(MiB, MemoryLocation.DEVICE)).isPresent(); ) {
                    held.add(more.get());
                }
                for (int i = 0; i < 15; i++) {
                    held.add(tenant.allocate(MiB, MemoryLocation.DEVICE));
                }
                long booksLeave = 64 * MiB - 16 * MiB - neighbour.statistics().allocatedBytes();
                AtomicReference<Object> making = new AtomicReference<>();
                try (Breakpoint breakpoint = Breakpoint.at(BudgetAllocations.class, "<init>", 1, "making")) {
                    Thread other = Thread.ofPlatform().name("making").start(() -> {
                        try (MemoryBudget made = manager.budget(BudgetSpec.of("other", booksLeave).withReservation(MemoryLocation.DEVICE, booksLeave))) {
                            making.set(made);
                        } catch (Throwable t) {
                            making.set(t);
                        }
                    });
                    breakpoint.awaitHit(60);
                    try {
                        held.add(tenant.allocate(MiB, MemoryLocation.DEVICE));
                        System.out.println("the tenant's 16th MiB, while the other budget was being made: served");
                    } catch (DeviceOutOfMemoryException e) {
                        System.out.println("the tenant's 16th MiB, while the other budget was being made: refused: " + e.getMessage());
                    }
                    breakpoint.release();
                    other.join();
                }
                System.out.println("the other budget: refused by the pool: " + (making.get() instanceof BudgetReservationException refused
                        && refused.getMessage().contains("whole segments and pages")) + " (" + making.get() + ")");
                held.forEach(UnifiedBuffer::close);
            }
        }
    }
}
