package dev.compute.memory.jfr;

import jdk.jfr.Category;
import jdk.jfr.DataAmount;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;

/** An allocation failed for good with DeviceOutOfMemoryException; its stack trace is the allocating caller's. */
@Name("dev.compute.memory.OutOfMemory")
@Label("Compute Out Of Memory")
@Category({"Compute", "Memory"})
@Description("An allocation failed with DeviceOutOfMemoryException, after the pool released its cache and retried")
final class OutOfMemoryEvent extends Event {

    @Label("Location")
    @Description("DEVICE, HOST, PINNED or UNIFIED")
    String location;

    @Label("Requested Bytes")
    @DataAmount
    long requestedBytes;

    @Label("Reason")
    @Description("Which limit was met: POOL_LIMIT, ADAPTOR_LIMIT, BUDGET_LIMIT, DEVICE_MEMORY or DEVICE_WORK_STUCK")
    String reason;
}
