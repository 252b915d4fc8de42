package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;
import jdk.jfr.Timespan;

/** A compaction moved buffers that nothing held and gave memory back. */
@Name("dev.compute.memory.Compaction")
@Label("Compute Compaction")
@Category({"Compute", "Memory"})
@Description("A compaction moved the memory of buffers nothing held, so that free space coalesced, and gave memory back")
@StackTrace(false)
final class CompactionEvent extends Event {

    @Label("Location")
    @Description("DEVICE, HOST, PINNED or UNIFIED")
    String location;

    @Label("Buffers Moved")
    long buffersMoved;

    @Label("Bytes Moved")
    @DataAmount
    long bytesMoved;

    @Label("Buffers In Use")
    @Description("Buffers it could have moved but an op, copy, view, access or device work held")
    long buffersInUse;

    @Label("Released Bytes")
    @DataAmount
    long releasedBytes;

    @Label("Fragmentation Before")
    @Description("1 - largest free block / cached bytes, before")
    double fragmentationBefore;

    @Label("Fragmentation After")
    double fragmentationAfter;

    @Label("Compaction Duration")
    @Timespan(Timespan.NANOSECONDS)
    long compactionDuration;
}
