package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_context;
import org.jocl.cl_context_properties;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The backend's context and in-order queue on the device the backend would choose (PoCL here), held at a user event
 * where a test needs work that has not finished: positions and markers complete only after what was queued before
 * them; work recorded from elsewhere is waited for apart from the queue and ordered before it by a barrier; close
 * refuses new work, releases once, and keeps the queue when its work does not finish in time.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OpenClQueueTest {

    private OpenClDevice device;
    private OpenClQueue queue;

    @BeforeEach
    void open() {
        OpenClTestSupport.requireOpenCl();
        device = OpenClDevices.choose(OpenClTestSupport.defaultSettings()).device();
        queue = new OpenClQueue(device, OpenClDeviceProperties.read(device).markersTakeWaitLists(), BackendSettings.DEFAULT_DEVICE_WAIT_TIMEOUT);
    }

    @AfterEach
    void close() {
        if (queue != null) {
            queue.close(Duration.ofSeconds(10), () -> { });
        }
    }

    private cl_event userEvent(cl_context context) {
        int[] error = new int[1];
        cl_event event = CL.clCreateUserEvent(context, error);
        OpenClCalls.check(error[0], "clCreateUserEvent");
        return event;
    }

    /** Holds the queue: nothing queued after this runs before {@code gate} is complete. */
    private void holdAt(cl_event gate) {
        OpenClCalls.check(CL.clEnqueueBarrierWithWaitList(queue.commandQueue(), 1, new cl_event[] {gate}, null), "clEnqueueBarrierWithWaitList");
        OpenClCalls.check(CL.clFlush(queue.commandQueue()), "clFlush");
    }

    private static void complete(cl_event event) {
        OpenClCalls.check(CL.clSetUserEventStatus(event, CL.CL_COMPLETE), "clSetUserEventStatus");
    }

    private static int status(cl_event event) {
        int[] status = new int[1];
        OpenClCalls.check(CL.clGetEventInfo(event, CL.CL_EVENT_COMMAND_EXECUTION_STATUS, Sizeof.cl_int, Pointer.to(status), null), "clGetEventInfo");
        return status[0];
    }

    private static long finishingThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(thread -> thread.getName().startsWith("opencl-finish-")).count();
    }

    private static void settle() throws InterruptedException {
        Thread.sleep(100);
    }

    @Test
    void aPositionNothingWaitsOnCompletesSoonAfterItsCommandsWithoutAWaitOfItsOwn() throws Exception {
        cl_event gate = userEvent(queue.context());
        try {
            holdAt(gate);
            CompletableFuture<Void> position = queue.position();
            CompletableFuture<Void> combined = CompletableFuture.allOf(position); // attaches without the position's own methods
            settle();
            assertThat(position).isNotDone();

            complete(gate);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!combined.isDone() && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertThat(combined).as("the waiter marked it on its own").isDone();
            assertThat(position).isDone();
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
            CL.clReleaseEvent(gate);
        }
    }

    @Test
    void positionsAndMarkersCompleteOnlyAfterWhatWasQueuedBeforeThem() throws Exception {
        cl_event gate = userEvent(queue.context());
        try {
            holdAt(gate);
            CompletableFuture<Void> position = queue.position();
            CompletableFuture<Void> marker = queue.marker();
            cl_event markerEvent = queue.markerEvent();
            settle();
            assertThat(position).isInstanceOf(QueuePositions.Position.class).isNotDone();
            assertThat(marker).isNotDone();
            assertThat(status(markerEvent)).isNotEqualTo(CL.CL_COMPLETE);
            assertThat(queue.awaitIdle(Duration.ofMillis(50))).isFalse();

            complete(gate);
            assertThat(position).succeedsWithin(Duration.ofSeconds(10));
            assertThat(marker).succeedsWithin(Duration.ofSeconds(10));
            OpenClCalls.check(CL.clWaitForEvents(1, new cl_event[] {markerEvent}), "clWaitForEvents");
            CL.clReleaseEvent(markerEvent);
            assertThat(queue.awaitIdle(Duration.ofSeconds(10))).isTrue();
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
            CL.clReleaseEvent(gate);
        }
    }

    @Test
    void recordedWorkIsWaitedForApartFromTheQueue() throws Exception {
        cl_event work = userEvent(queue.context());
        try {
            CompletableFuture<Void> recorded = queue.trackRecorded(work);
            settle();
            assertThat(recorded).isNotDone();
            assertThat(queue.marker()).as("the queue's own work does not wait for it").succeedsWithin(Duration.ofSeconds(10));
            assertThat(queue.awaitIdle(Duration.ofMillis(50))).as("idle waits for recorded work too").isFalse();

            complete(work);
            assertThat(recorded).succeedsWithin(Duration.ofSeconds(10));
            assertThat(queue.awaitIdle(Duration.ofSeconds(10))).isTrue();
        } finally {
            CL.clSetUserEventStatus(work, CL.CL_COMPLETE);
            CL.clReleaseEvent(work); // the queue retained it for itself
        }
    }

    @Test
    void anEventOfAnotherContextIsRefused() {
        cl_context_properties properties = new cl_context_properties();
        properties.addProperty(CL.CL_CONTEXT_PLATFORM, device.platformId());
        int[] error = new int[1];
        cl_context other = CL.clCreateContext(properties, 1, new cl_device_id[] {device.deviceId()}, null, null, error);
        OpenClCalls.check(error[0], "clCreateContext");
        cl_event foreign = userEvent(other);
        try {
            assertThatThrownBy(() -> queue.trackRecorded(foreign)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("another OpenCL context");
        } finally {
            CL.clSetUserEventStatus(foreign, CL.CL_COMPLETE); // NVIDIA's clReleaseContext waits for a user event never set
            CL.clReleaseEvent(foreign);
            CL.clReleaseContext(other);
        }
    }

    @Test
    void workOfThisQueueNeedsNoOrderingAndRecordedWorkGetsABarrier() throws Exception {
        CompletableFuture<Void> position = queue.position();
        assertThat(queue.orderAfter(CompletableFuture.completedFuture(null))).isTrue();
        assertThat(queue.orderAfter(position)).as("a position of this queue").isTrue();
        assertThat(queue.orderAfter(new CompletableFuture<>())).as("a future of no queue: waited for on the host").isFalse();

        cl_event work = userEvent(queue.context());
        try {
            CompletableFuture<Void> recorded = queue.trackRecorded(work);
            assertThat(queue.orderAfter(recorded)).isTrue();
            CompletableFuture<Void> after = queue.marker();
            settle();
            assertThat(after).as("the barrier holds the queue behind the recorded work").isNotDone();

            assertThat(OpenClQueue.supersedes(after, position)).isTrue();
            assertThat(OpenClQueue.supersedes(after, recorded)).as("recorded work is on a queue of its own").isFalse();
            assertThat(OpenClQueue.supersedes(new CompletableFuture<>(), position)).isFalse();

            complete(work);
            assertThat(after).succeedsWithin(Duration.ofSeconds(10));
            assertThat(recorded).succeedsWithin(Duration.ofSeconds(10));
        } finally {
            CL.clSetUserEventStatus(work, CL.CL_COMPLETE);
            CL.clReleaseEvent(work);
        }
    }

    /**
     * Recorded work that has failed (its command ended with a negative status, as a user event set to an error does)
     * is over: no barrier for it. On PoCL a barrier whose wait list holds an event that failed before it was queued
     * stays queued for ever, and the in-order queue with it: every copy, op and kernel of every buffer after it.
     */
    @Test
    void recordedWorkThatFailedAlreadyGetsNoBarrier() {
        cl_event work = userEvent(queue.context());
        try {
            // as the waiter holds it before it has looked at the event again
            EventCompletions.EventWork recorded = new EventCompletions.EventWork(work, false);
            OpenClCalls.check(CL.clSetUserEventStatus(work, CL.CL_OUT_OF_RESOURCES), "clSetUserEventStatus");
            assertThat(recorded.orderQueue(queue.commandQueue(), queue.context())).isTrue();
            assertThat(queue.marker()).as("the queue after the failed work's ordering").succeedsWithin(Duration.ofSeconds(5));
        } finally {
            CL.clReleaseEvent(work);
        }
    }

    @Test
    void closeRefusesNewWorkAndReleasesOnce() {
        AtomicInteger ran = new AtomicInteger();
        assertThat(queue.runWhileOpen(ran::incrementAndGet)).isTrue();
        queue.runUnlessReleased(ran::incrementAndGet);
        assertThat(ran).hasValue(2);

        AtomicInteger released = new AtomicInteger();
        queue.close(Duration.ofSeconds(10), released::incrementAndGet);
        queue.close(Duration.ofSeconds(10), released::incrementAndGet);
        assertThat(released).as("what uses the queue is released once").hasValue(1);

        assertThatThrownBy(queue::checkOpen).isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed")
                .hasMessageContaining(device.describe());
        assertThatThrownBy(queue::markerEvent).isInstanceOf(IllegalStateException.class);
        assertThat(queue.position()).as("close's own future, already complete").isDone();
        assertThat(queue.marker()).isDone();
        assertThat(queue.awaitIdle(Duration.ZERO)).isTrue();
        assertThat(queue.runWhileOpen(ran::incrementAndGet)).isFalse();
        queue.runUnlessReleased(ran::incrementAndGet);
        assertThat(ran).as("nothing runs on a released queue").hasValue(2);
        queue = null;
    }

    @Test
    void closeOnWorkThatNeverFinishesIsBoundedAndKeepsTheQueue() {
        cl_event gate = userEvent(queue.context());
        try {
            holdAt(gate);
            AtomicInteger released = new AtomicInteger();
            long start = System.nanoTime();
            assertTimeoutPreemptively(Duration.ofSeconds(10), () -> queue.close(Duration.ofMillis(300), released::incrementAndGet));
            assertThat((System.nanoTime() - start) / 1_000_000).as("close waited about its bound").isBetween(250L, 5_000L);
            assertThat(released).as("nothing is released under the work").hasValue(0);
            assertThatThrownBy(queue::checkOpen).isInstanceOf(IllegalStateException.class);
            AtomicInteger ran = new AtomicInteger();
            queue.runUnlessReleased(ran::incrementAndGet);
            assertThat(ran).as("the kept queue is still there to use").hasValue(1);
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE); // the kept queue drains now
            CL.clReleaseEvent(gate);
            queue = null;
        }
    }

    @Test
    void aMarkerThatCannotBeQueuedWaitsForTheQueueWithoutHoldingUpOtherCalls() throws Exception {
        cl_event gate = userEvent(queue.context());
        try {
            holdAt(gate);
            queue.failMarkersWith = CL.CL_OUT_OF_RESOURCES;
            CompletableFuture<Void> marker = assertTimeoutPreemptively(Duration.ofSeconds(5), queue::marker,
                    "a failed marker's wait for the queue holds no caller");
            CompletableFuture<Void> position = queue.position();
            assertThat(assertTimeoutPreemptively(Duration.ofSeconds(5), () -> queue.awaitIdle(Duration.ofMillis(50)))).isFalse();
            assertTimeoutPreemptively(Duration.ofSeconds(5), () -> queue.runWhileOpen(() -> { }), "the lifecycle lock is free");
            settle();
            assertThat(marker).as("the memory it covers is kept while the queue runs").isNotDone();
            assertThat(position).isNotDone();

            complete(gate);
            assertThat(marker).failsWithin(Duration.ofSeconds(10)).withThrowableThat().withMessageContaining("clEnqueueMarker");
            assertThat(position).failsWithin(Duration.ofSeconds(10)).withThrowableThat().withMessageContaining("clEnqueueMarker");
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
            CL.clReleaseEvent(gate);
            queue.failMarkersWith = CL.CL_SUCCESS;
        }
    }

    @Test
    void aStormOfMarkersThatCannotBeQueuedWaitsForTheQueueOnOneThread() throws Exception {
        cl_event gate = userEvent(queue.context());
        List<CompletableFuture<Void>> markers = new ArrayList<>();
        long finishingBefore = finishingThreads(); // an earlier test's, ending
        try {
            holdAt(gate);
            queue.failMarkersWith = CL.CL_OUT_OF_RESOURCES;
            for (int i = 0; i < 50; i++) {
                markers.add(assertTimeoutPreemptively(Duration.ofSeconds(5), queue::marker));
            }
            settle();
            assertThat(finishingThreads()).as("threads waiting in clFinish for one queue").isBetween(1L, 1 + finishingBefore);
            assertThat(markers).as("the memory they cover is kept while the queue runs").noneMatch(CompletableFuture::isDone);

            complete(gate);
            for (CompletableFuture<Void> marker : markers) {
                assertThat(marker).failsWithin(Duration.ofSeconds(10)).withThrowableThat().withMessageContaining("clEnqueueMarker");
            }
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE);
            CL.clReleaseEvent(gate);
            queue.failMarkersWith = CL.CL_SUCCESS;
        }
    }

    @Test
    void closeAfterAMarkerThatCannotBeQueuedIsBoundedAndKeepsTheQueueTheFinishStillUses() {
        cl_event gate = userEvent(queue.context());
        try {
            holdAt(gate);
            queue.failMarkersWith = CL.CL_OUT_OF_RESOURCES;
            AtomicInteger released = new AtomicInteger();
            assertTimeoutPreemptively(Duration.ofSeconds(10), () -> {
                queue.marker();
                queue.failMarkersWith = CL.CL_SUCCESS;
                queue.close(Duration.ofMillis(300), released::incrementAndGet);
            });
            assertThat(released).as("nothing is released under the finish").hasValue(0);
            AtomicInteger ran = new AtomicInteger();
            queue.runUnlessReleased(ran::incrementAndGet);
            assertThat(ran).as("the kept queue is still there").hasValue(1);
        } finally {
            CL.clSetUserEventStatus(gate, CL.CL_COMPLETE); // the finish returns now, on a queue still there
            CL.clReleaseEvent(gate);
            queue.failMarkersWith = CL.CL_SUCCESS;
            queue = null;
        }
    }
}
