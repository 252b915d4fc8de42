package dev.compute.benchmarks;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code reservation-churn BACKEND SECONDS}: how often a budget's reservation fails its tenant beside a neighbour that
 * churns. A 64 MiB pool; tenant {@code reserved} reserves 32 MiB of DEVICE and asks for two 16 MiB buffers, frees them,
 * and again, for {@code SECONDS}; tenant {@code noisy}, with no limit below the cap, allocates buffers of 64 KiB to 6 MiB
 * with {@code tryAllocate} on a thread of its own and, when refused, frees one it holds at random (seeded). Prints the
 * reserved tenant's rounds and refusals and the neighbour's allocations and peak; exit status 0, 2 for a wrong command
 * line. The books never let the neighbour hold more than 32 MiB; what is measured is whether the pool keeps the rest.
 */
public final class ReservationChurn {

    private static final long MiB = 1L << 20;

    private ReservationChurn() {}

    /** What one run saw. */
    record Figures(String backend, long rounds, long refused, long neighbourAllocations, long neighbourPeakBytes) {
        double refusedShare() {
            return rounds == 0 ? 0 : (double) refused / rounds;
        }
    }

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length != 2 || !args[1].matches("[1-9][0-9]{0,3}")) {
            err.println("reservation-churn: takes a backend (cpu, opencl, cuda) and a number of seconds (1 to 9999)");
            return 2;
        }
        Figures figures = measure(args[0], Duration.ofSeconds(Integer.parseInt(args[1])));
        out.printf(Locale.ROOT, "reservation-churn backend=%s rounds=%d refused=%d refused_share=%.4f neighbour_allocations=%d neighbour_peak=%d%n",
                figures.backend(), figures.rounds(), figures.refused(), figures.refusedShare(), figures.neighbourAllocations(),
                figures.neighbourPeakBytes());
        return 0;
    }

    static Figures measure(String backend, Duration duration) {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).timelineInterval(Duration.ZERO)
                .maxPoolSize(64 * MiB).build();
             MemoryBudget reserved = manager.budget(BudgetSpec.of("reserved", 32 * MiB).withReservation(MemoryLocation.DEVICE, 32 * MiB));
             MemoryBudget noisy = manager.budget("noisy", 64 * MiB)) {
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong neighbourAllocations = new AtomicLong();
            Thread neighbour = Thread.ofPlatform().name("noisy-neighbour").start(() -> churn(noisy, stop, neighbourAllocations));
            long rounds = 0;
            long refused = 0;
            try {
                long end = System.nanoTime() + duration.toNanos();
                while (System.nanoTime() - end < 0) {
                    rounds++;
                    try (UnifiedBuffer first = reserved.allocate(16 * MiB, MemoryLocation.DEVICE);
                         UnifiedBuffer second = reserved.allocate(16 * MiB, MemoryLocation.DEVICE)) {
                        first.byteSize(); // held together, then freed
                    } catch (DeviceOutOfMemoryException e) {
                        refused++;
                    }
                }
            } finally {
                stop.set(true);
                joinQuietly(neighbour);
            }
            return new Figures(backend, rounds, refused, neighbourAllocations.get(), noisy.statistics().allocatedBytesPeak());
        }
    }

    private static void churn(MemoryBudget noisy, AtomicBoolean stop, AtomicLong allocations) {
        List<UnifiedBuffer> held = new ArrayList<>();
        SplittableRandom random = new SplittableRandom(30);
        try {
            while (!stop.get()) {
                Optional<UnifiedBuffer> more = noisy.tryAllocate(random.nextLong(64 * 1024, 6 * MiB), MemoryLocation.DEVICE);
                if (more.isPresent()) {
                    held.add(more.get());
                    allocations.incrementAndGet();
                } else if (!held.isEmpty()) {
                    held.remove(random.nextInt(held.size())).close();
                }
            }
        } finally {
            held.forEach(UnifiedBuffer::close);
        }
    }

    private static void joinQuietly(Thread thread) {
        try {
            thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
