package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import org.jspecify.annotations.Nullable;

/** A buffer was garbage-collected without close(); found on the leak detector's thread, so its stack says nothing. */
@Name("dev.compute.memory.Leak")
@Label("Compute Buffer Leak")
@Category({"Compute", "Memory"})
@Description("A UnifiedBuffer was garbage-collected without close(); its memory went back to the pool")
@StackTrace(false)
final class LeakEvent extends Event {

    @Label("Location")
    @Description("DEVICE, HOST, PINNED or UNIFIED")
    String location;

    @Label("Bytes")
    @DataAmount
    long bytes;

    @Label("Allocation Site")
    @Description("Where the buffer was allocated, the application's first frames; recorded under leak-detection paranoid only")
    @Nullable String allocationSite;
}
