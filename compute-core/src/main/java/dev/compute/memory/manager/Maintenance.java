package dev.compute.memory.manager;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.LibraryThreads;
import dev.compute.memory.internal.ManagerLog;
import java.time.Duration;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The manager's maintenance thread, where any is needed: scheduled trims ({@code trim-interval}), compactions
 * ({@code compaction-interval}, with pooling on) and timeline samples ({@code timeline.interval}). What fails there is
 * logged; the thread goes on.
 */
public final class Maintenance {

    private static final System.Logger LOG = ManagerLog.logger();

    private final CallGate gate;
    private final LocationChains chains;
    private final Compactor compactor;
    private final ManagerFigures figures;
    private final LongSupplier trim;
    private final BufferServices buffers;
    private final @Nullable ScheduledExecutorService executor;

    /** Starts the thread where the settings ask for anything; {@code trim} trims every location to the release threshold. */
    public Maintenance(ManagerSettings settings, CallGate gate, LocationChains chains, Compactor compactor, ManagerFigures figures,
                       BufferServices buffers, LongSupplier trim) {
        this.gate = gate;
        this.chains = chains;
        this.compactor = compactor;
        this.figures = figures;
        this.buffers = buffers;
        this.trim = trim;
        this.executor = start(settings.trimInterval(), settings.poolingEnabled() ? settings.compactionInterval() : Duration.ZERO,
                settings.timelineInterval(), settings.heldMemoryWarning());
    }

    private @Nullable ScheduledExecutorService start(Duration trimInterval, Duration compactionInterval, Duration sampleInterval,
                                                     Duration heldWarning) {
        long trimMillis = trimInterval.toMillis();
        long compactionMillis = compactionInterval.toMillis();
        long sampleMillis = sampleInterval.toMillis();
        long heldMillis = heldWarning.toMillis();
        if (trimMillis <= 0 && compactionMillis <= 0 && sampleMillis <= 0 && heldMillis <= 0) {
            return null;
        }
        ScheduledExecutorService started = Executors.newSingleThreadScheduledExecutor(
                LibraryThreads.daemons("compute-memory-maintenance", false));
        if (trimMillis > 0) {
            started.scheduleWithFixedDelay(this::scheduledTrim, trimMillis, trimMillis, TimeUnit.MILLISECONDS);
        }
        if (compactionMillis > 0) {
            started.scheduleWithFixedDelay(this::scheduledCompaction, compactionMillis, compactionMillis, TimeUnit.MILLISECONDS);
        }
        if (sampleMillis > 0) {
            sampleTimeline();
            started.scheduleAtFixedRate(this::scheduledSample, sampleMillis, sampleMillis, TimeUnit.MILLISECONDS);
        }
        if (heldMillis > 0) {
            long every = Math.max(1, heldMillis / 2);
            started.scheduleWithFixedDelay(() -> warnAboutHeld(heldWarning), every, every, TimeUnit.MILLISECONDS);
        }
        return started;
    }

    private void scheduledTrim() {
        try {
            long released = trim.getAsLong();
            if (released > 0) {
                LOG.log(System.Logger.Level.DEBUG, "scheduled trim released " + released + " bytes");
            }
        } catch (Throwable e) { // an Error too: one out of a scheduled task would cancel it for the manager's life
            LOG.log(System.Logger.Level.WARNING, "scheduled trim failed", e);
        }
    }

    private void scheduledCompaction() {
        try {
            for (MemoryLocation location : chains.locations()) {
                if (gate.isClosed()) {
                    return;
                }
                CompactionReport report = compactor.compact(location);
                if (report.buffersMoved() > 0 || report.bytesReleased() > 0) {
                    LOG.log(System.Logger.Level.DEBUG, "scheduled compaction of " + location + " moved " + report.buffersMoved()
                            + " buffer(s) and released " + report.bytesReleased() + " bytes");
                }
            }
        } catch (IllegalStateException closedMeanwhile) {
            // the manager closed between the check and the compaction: nothing left to compact
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.WARNING, "scheduled compaction failed", e);
        }
    }

    private void warnAboutHeld(Duration bound) {
        try {
            buffers.warnAboutHeld(bound);
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.WARNING, "checking closed buffers' held memory failed", e);
        }
    }

    private void scheduledSample() {
        try {
            sampleTimeline();
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.WARNING, "sampling the timeline failed", e);
        }
    }

    /** Adds one sample per location to the timeline; nothing once the manager is closed. */
    void sampleTimeline() {
        if (!gate.isClosed()) {
            figures.sampleTimeline();
        }
    }

    void stop() {
        if (executor != null) {
            executor.shutdownNow();
        }
    }
}
