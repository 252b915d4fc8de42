package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/** A pool's segments and blocks were read (a snapshot: the endpoint's view of a location), a stretch at a time. */
@Name("dev.compute.memory.SnapshotRead")
@Label("Compute Snapshot Read")
@Category({"Compute", "Memory"})
@Description("A pool's segments and blocks were read, a stretch at a time under its lock: how long in all, and the longest stretch")
@StackTrace(false)
final class SnapshotReadEvent extends Event {

    @Label("Location")
    @Description("DEVICE, HOST, PINNED or UNIFIED")
    String location;

    @Label("Blocks")
    int blocks;

    @Label("Holds")
    @Description("Stretches under the pool's lock")
    int holds;

    @Label("Longest Hold")
    @Description("The longest the read held the pool's lock at once")
    @Timespan(Timespan.NANOSECONDS)
    long longestHold;

    @Label("Read Duration")
    @Timespan(Timespan.NANOSECONDS)
    long readDuration;
}
