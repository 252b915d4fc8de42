package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/** A trim (scheduled or asked for) gave cached memory back. */
@Name("dev.compute.memory.Trim")
@Label("Compute Trim")
@Category({"Compute", "Memory"})
@Description("A trim, scheduled or asked for, gave cached memory back to the backend")
@StackTrace(false)
final class TrimEvent extends Event {

    @Label("Location")
    @Description("DEVICE, HOST, PINNED or UNIFIED")
    String location;

    @Label("Released Bytes")
    @DataAmount
    long releasedBytes;
}
