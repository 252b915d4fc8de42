package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Timespan;

/** The backend gave the pool memory: a pool miss. Its stack trace shows who asked for memory the pool did not have. */
@Name("dev.compute.memory.BackendAllocation")
@Label("Compute Backend Allocation")
@Category({"Compute", "Memory"})
@Description("The backend gave the pool memory (a segment allocated, or pages mapped into a reserved range)")
final class BackendAllocationEvent extends Event {

    @Label("Location")
    @Description("DEVICE, HOST, PINNED or UNIFIED")
    String location;

    @Label("Bytes")
    @DataAmount
    long bytes;

    @Label("Call Duration")
    @Description("How long the backend call took")
    @Timespan(Timespan.NANOSECONDS)
    long callDuration;
}
