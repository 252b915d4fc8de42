package dev.compute.benchmarks.replay;

import java.util.Locale;

/**
 * The figures of one trace: live and reserved peaks, the smallest capacity that fits the whole trace, the
 * backend calls and the speed of the default-settings run. Ratios are to the live peak (the sum of the
 * sizes the trace names, before rounding).
 */
public record ReplayResult(String trace, int events, long livePeak, long reservedPeak, long minCapacity,
                           long backendCalls, double eventsPerSecond) {

    public double overhead() {
        return (double) reservedPeak / livePeak;
    }

    public double capacityRatio() {
        return (double) minCapacity / livePeak;
    }

    /** The one line per trace that scripts read. */
    public String line() {
        return String.format(Locale.ROOT, "replay trace=%s events=%d live_peak=%d reserved_peak=%d overhead=%.3f min_capacity=%d"
                        + " capacity_ratio=%.3f backend_calls=%d ops_per_s=%d",
                trace, events, livePeak, reservedPeak, overhead(), minCapacity, capacityRatio(), backendCalls, Math.round(eventsPerSecond));
    }

    /** The same figures for people, with what each means. */
    public String table() {
        return String.format(Locale.ROOT, """
                  %-16s %,18d   allocations and frees replayed
                  %-16s %,18d   bytes live at the peak (%.3f GB)
                  %-16s %,18d   bytes the pool held at its peak, default settings (%.3f GB)
                  %-16s %18.3f   reserved peak / live peak
                  %-16s %,18d   smallest device capacity in which the whole trace replays (%.3f GB)
                  %-16s %18.3f   min capacity / live peak
                  %-16s %,18d   segment allocations and frees, range reservations, page maps and unmaps
                  %-16s %,18d   events replayed per second, default settings
                """,
                "events", events, "live peak", livePeak, livePeak / 1e9, "reserved peak", reservedPeak, reservedPeak / 1e9,
                "overhead", overhead(), "min capacity", minCapacity, minCapacity / 1e9, "capacity ratio", capacityRatio(),
                "backend calls", backendCalls, "ops/s", Math.round(eventsPerSecond));
    }
}
