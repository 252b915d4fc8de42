package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Timespan;

/** An allocation met out-of-memory and the pool or an OutOfMemoryHandler tried to make room. */
@Name("dev.compute.memory.OutOfMemoryRecovery")
@Label("Compute Out Of Memory Recovery")
@Category({"Compute", "Memory"})
@Description("An allocation met out-of-memory; the pool released its cache (or a handler freed memory) and retried")
final class OutOfMemoryRecoveryEvent extends Event {

    @Label("Location")
    @Description("DEVICE, HOST, PINNED or UNIFIED")
    String location;

    @Label("Requested Bytes")
    @DataAmount
    long requestedBytes;

    @Label("Outcome")
    @Description("RECOVERED when the allocation then succeeded, FAILED when it still found no memory")
    String outcome;

    @Label("Recovery Duration")
    @Description("How long the attempt took")
    @Timespan(Timespan.NANOSECONDS)
    long recoveryDuration;
}
