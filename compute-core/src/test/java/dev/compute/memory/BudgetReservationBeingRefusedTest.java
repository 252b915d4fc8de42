package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

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
 * A reservation the books take but the pool's memory cannot keep is refused as its budget is made; while it is being
 * made, before the pool is asked, it must take no room from the reservations that stand: a reserved tenant's request
 * within its reservation is served then as at any other moment.
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

    /**
     * A tenant reserving 16 MiB of a 64 MiB pool and holding 15 of it; a neighbour holding all the pool lets it hold
     * beside that; another budget reserving what the books leave (which the pool's memory, held in whole segments, cannot
     * keep), held, as by a debugger, after the books took it and before the pool is asked, while the tenant asks for the
     * last MiB of its reservation.
     */
    static final class TenantAskingWhileAReservationIsMade {
        public static void main(String[] args) throws Exception {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                    .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).build();
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
