package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.Timespan;

/** The pool gave memory back to the backend: on a trim, under memory pressure, or at close. */
@Name("dev.compute.memory.BackendFree")
@Label("Compute Backend Free")
@Category({"Compute", "Memory"})
@Description("The pool gave memory back to the backend (a segment freed, or pages unmapped)")
final class BackendFreeEvent extends Event {

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
