package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
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
 * OpenCL events turned into futures, on the device the backend would choose (PoCL here): user events stand for
 * commands, so the test decides when each ends and how. A future completes only once its command is complete, in the
 * order the events were handed in; a failed command fails its future; a barrier waits for all before it; a dependent
 * action that blocks holds up no other, even one the waiter ran itself; the event is released once waited for; close
 * waits for everything handed in.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class EventCompletionsTest {

    private cl_context context;
    private EventCompletions completions;

    @BeforeEach
    void open() {
        OpenClTestSupport.requireOpenCl();
        OpenClDevice device = OpenClDevices.choose(OpenClTestSupport.defaultSettings()).device();
        cl_context_properties properties = new cl_context_properties();
        properties.addProperty(CL.CL_CONTEXT_PLATFORM, device.platformId());
        int[] error = new int[1];
        context = CL.clCreateContext(properties, 1, new cl_device_id[] {device.deviceId()}, null, null, error);
        OpenClCalls.check(error[0], "clCreateContext");
        completions = new EventCompletions(device.deviceName(), true);
    }

    @AfterEach
    void close() throws InterruptedException {
        if (completions != null) {
            // close waits for every command and ignores interrupts: bounded here, so a broken waiter fails the test
            EventCompletions closing = completions;
            Thread closer = Thread.ofPlatform().daemon().start(() -> closing.close(Duration.ofSeconds(10)));
            closer.join(15_000);
            assertThat(closer.isAlive()).as("the completions closed within 10 s").isFalse();
        }
        if (context != null) {
            CL.clReleaseContext(context);
        }
    }

    private cl_event command() {
        int[] error = new int[1];
        cl_event event = CL.clCreateUserEvent(context, error);
        OpenClCalls.check(error[0], "clCreateUserEvent");
        return event;
    }

    private static void end(cl_event command, int status) {
        OpenClCalls.check(CL.clSetUserEventStatus(command, status), "clSetUserEventStatus");
    }

    private static void settle() throws InterruptedException {
        Thread.sleep(100);
    }

    @Test
    void aFutureCompletesOnlyOnceItsCommandIsComplete() throws Exception {
        cl_event command = command();
        CompletableFuture<Void> done = completions.completion(command, "a copy");

        settle();
        assertThat(done).isNotDone();
        end(command, CL.CL_COMPLETE);

        assertThat(done).succeedsWithin(Duration.ofSeconds(10));
    }

    @Test
    void aFailedCommandFailsItsFutureNamingTheCommand() {
        cl_event command = command();
        CompletableFuture<Void> done = completions.completion(command, "the fill kernel");

        end(command, CL.CL_INVALID_VALUE);

        assertThat(done).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                .havingCause().isInstanceOfSatisfying(OpenClException.class, e -> {
                    assertThat(e.errorCode()).isEqualTo(CL.CL_INVALID_VALUE);
                    assertThat(e).hasMessageStartingWith("the fill kernel failed: CL_INVALID_VALUE");
                });
    }

    @Test
    void futuresCompleteInTheOrderTheirEventsWereHandedInNeverEarlier() throws Exception {
        cl_event first = command();
        cl_event second = command();
        CompletableFuture<Void> firstDone = completions.completion(first, "first");
        CompletableFuture<Void> secondDone = completions.completion(second, "second");

        end(second, CL.CL_COMPLETE);
        settle();
        assertThat(secondDone).as("complete, but waited for in turn: later, never earlier").isNotDone();
        assertThat(firstDone).isNotDone();
        end(first, CL.CL_COMPLETE);

        assertThat(firstDone).succeedsWithin(Duration.ofSeconds(10));
        assertThat(secondDone).succeedsWithin(Duration.ofSeconds(10));
    }

    @Test
    void aBarrierCompletesOnceEveryCommandHandedInBeforeItHasEnded() throws Exception {
        assertThat(completions.barrier()).as("nothing before it").succeedsWithin(Duration.ofSeconds(10));
        cl_event command = command();
        CompletableFuture<Void> done = completions.completion(command, "a kernel");
        CompletableFuture<Void> barrier = completions.barrier();

        settle();
        assertThat(barrier).isNotDone();
        end(command, CL.CL_INVALID_VALUE); // a failed command is over too

        assertThat(barrier).succeedsWithin(Duration.ofSeconds(10));
        assertThat(done).isCompletedExceptionally();
    }

    @Test
    void aDependentActionThatBlocksHoldsUpNoOtherCompletion() throws Exception {
        cl_event first = command();
        cl_event second = command();
        CompletableFuture<Void> firstDone = completions.completion(first, "first");
        CompletableFuture<Void> secondDone = completions.completion(second, "second");
        AtomicReference<String> ranOn = new AtomicReference<>();
        CompletableFuture<Void> dependent = firstDone.thenRun(() -> {
            ranOn.set(Thread.currentThread().toString());
            secondDone.orTimeout(10, TimeUnit.SECONDS).join(); // waits for a later command
        });

        // this thread waits on neither future until both commands ended: a thread waiting on a future may run its
        // dependent actions itself, and this one must not be the one blocked in the dependent
        end(first, CL.CL_COMPLETE);
        end(second, CL.CL_COMPLETE);

        assertThat(secondDone).succeedsWithin(Duration.ofSeconds(10));
        assertThat(dependent).succeedsWithin(Duration.ofSeconds(10));
        assertThat(ranOn.get()).as("on a completing thread, not the waiter").doesNotContain("opencl-events");
    }

    @Test
    void aWaiterHeldByAnActionItRanIsReplacedAndTheLaterCommandsStillComplete() throws Exception {
        heldWaiterIsReplaced();
    }

    @Test
    void onAnIdleDeviceTheWatchSleepsAndTheNextCompletionWakesItToReplaceAHeldWaiter() throws Exception {
        Thread watch = Thread.getAllStackTraces().keySet().stream()
                .filter(thread -> thread.getName().startsWith("opencl-events watch ") && thread.isAlive())
                .max(Comparator.comparingLong(Thread::threadId)).orElseThrow(); // this test's: the newest
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (watch.getState() != Thread.State.WAITING) { // parked for good, not looking every so often
            assertThat(System.nanoTime() - deadline).as("the watch sleeps within 10 s on an idle device").isNegative();
            Thread.sleep(50);
        }

        heldWaiterIsReplaced();
    }

    private void heldWaiterIsReplaced() throws Exception {
        // hides its dependent from the count, as the waiter sees an action attached in the instant it completes a future
        CompletableFuture<Void> covered = new CompletableFuture<>() {
            @Override
            public int getNumberOfDependents() {
                return 0;
            }
        };
        cl_event first = command();
        cl_event second = command();
        completions.completion(first, "first", List.of(covered));
        CompletableFuture<Void> secondDone = completions.completion(second, "second");
        AtomicReference<String> ranOn = new AtomicReference<>();
        CompletableFuture<Void> dependent = covered.thenRun(() -> {
            ranOn.set(Thread.currentThread().getName());
            secondDone.orTimeout(10, TimeUnit.SECONDS).join(); // waits for a later command
        });

        end(first, CL.CL_COMPLETE);
        settle();
        end(second, CL.CL_COMPLETE);

        assertThat(secondDone).as("completed by the waiter that took over").succeedsWithin(Duration.ofSeconds(5));
        assertThat(dependent).succeedsWithin(Duration.ofSeconds(5));
        assertThat(ranOn.get()).as("the waiter completes a future with no dependents itself").startsWith("opencl-events ");
    }

    @Test
    void aFutureWithoutDependentsIsCompletedByTheWaiterAndOneWithDependentsOffIt() throws Exception {
        cl_event first = command();
        cl_event second = command();
        CompletableFuture<Void> bare = new CompletableFuture<>();
        CompletableFuture<Void> watched = new CompletableFuture<>();
        AtomicReference<String> watchedOn = new AtomicReference<>();
        CompletableFuture<Void> ran = watched.thenRun(() -> watchedOn.set(Thread.currentThread().getName()));
        completions.completion(first, "first", List.of(bare));
        completions.completion(second, "second", List.of(watched));

        end(first, CL.CL_COMPLETE);
        end(second, CL.CL_COMPLETE);

        assertThat(watched).succeedsWithin(Duration.ofSeconds(10));
        ran.get(10, TimeUnit.SECONDS); // the action runs off the waiter, after the future it depends on completed
        assertThat(bare).isDone();
        assertThat(watchedOn.get()).as("a dependent action runs on a thread of its own").doesNotStartWith("opencl-events");
    }

    @Test
    void aCallersStepRunsOnceOnTheWaiterBeforeTheCallersFutureCompletesAndAsksForNoThreadOfItsOwn() throws Exception {
        cl_event command = command();
        EventCompletions.EventWork done = completions.completion(command, "a staged copy");
        AtomicInteger runs = new AtomicInteger();
        AtomicReference<String> ranOn = new AtomicReference<>();
        AtomicReference<Throwable> seen = new AtomicReference<>(new AssertionError("not run"));
        CompletableFuture<Void> caller = done.forCaller(failure -> {
            runs.incrementAndGet();
            ranOn.set(Thread.currentThread().getName());
            seen.set(failure);
        });
        CountDownLatch cancelledStepRan = new CountDownLatch(1);
        CompletableFuture<Void> cancelled = done.forCaller(failure -> {
            runs.incrementAndGet();
            cancelledStepRan.countDown();
        });
        cancelled.cancel(false); // the caller gives up: the step still runs once the command has ended

        assertThat(done.onlyBlockedOn()).as("a step is no dependent action").isTrue();
        end(command, CL.CL_COMPLETE);

        assertThat(caller).succeedsWithin(Duration.ofSeconds(10));
        // each step runs before its own caller's future completes, in the order made: the second may still be running
        // as the first caller's future completes
        assertThat(cancelledStepRan.await(10, TimeUnit.SECONDS)).as("the cancelled caller's step ran too").isTrue();
        assertThat(runs.get()).isEqualTo(2);
        assertThat(seen.get()).isNull();
        assertThat(ranOn.get()).as("run where the command was completed").startsWith("opencl-events");
        // made after the command ended: the step runs at once, on the caller's thread, and once only
        CompletableFuture<Void> late = done.forCaller(failure -> runs.incrementAndGet());
        assertThat(late).isDone();
        assertThat(runs.get()).isEqualTo(3);
    }

    @Test
    void aStepThatThrowsFailsItsCallersFutureAndNeitherTheWorkNorAnotherCallers() throws Exception {
        cl_event command = command();
        EventCompletions.EventWork done = completions.completion(command, "a staged read");
        CompletableFuture<Void> failing = done.forCaller(failure -> {
            throw new IllegalStateException("the caller's arena is closed");
        });
        CompletableFuture<Void> plain = done.forCaller();

        end(command, CL.CL_COMPLETE);

        assertThat(failing).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(IllegalStateException.class);
        assertThat(done).succeedsWithin(Duration.ofSeconds(10));
        assertThat(plain).succeedsWithin(Duration.ofSeconds(10));
    }

    @Test
    void aFailedCommandReachesTheStepAndFailsTheCallerWithTheCommandsFailure() throws Exception {
        cl_event command = command();
        EventCompletions.EventWork done = completions.completion(command, "a staged write");
        AtomicReference<Throwable> seen = new AtomicReference<>();
        CompletableFuture<Void> caller = done.forCaller(failure -> {
            seen.set(failure);
            throw new IllegalStateException("a step's own failure comes second");
        });

        end(command, CL.CL_INVALID_VALUE);

        assertThat(caller).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
                .withMessageContaining("a staged write");
        assertThat(seen.get()).hasMessageContaining("a staged write");
    }

    @Test
    void aWakeSoonRunsTheWakeActionOnceWithinItsWhileAndBeforeClose() throws Exception {
        AtomicInteger runs = new AtomicInteger();
        completions.onWake(runs::incrementAndGet);

        completions.wakeSoon();
        completions.wakeSoon();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (runs.get() == 0 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(runs).as("once for both, without a wake-up at once").hasValue(1);

        completions.wakeSoon();
        assertThat(completions.close(Duration.ofSeconds(10))).isTrue(); // long before the while is over
        completions = null;
        assertThat(runs).as("close runs what was asked for first").hasValue(2);
    }

    @Test
    void anEventIsReleasedOnceItsCommandWasWaitedFor() throws Exception {
        cl_event command = command();
        CL.clRetainEvent(command); // the test's own reference, beside the one handed over
        CompletableFuture<Void> done = completions.completion(command, "a copy");

        end(command, CL.CL_COMPLETE);
        done.get(10, TimeUnit.SECONDS);
        completions.barrier().get(10, TimeUnit.SECONDS);

        int[] references = new int[1];
        OpenClCalls.check(CL.clGetEventInfo(command, CL.CL_EVENT_REFERENCE_COUNT, Sizeof.cl_uint, Pointer.to(references), null),
                "clGetEventInfo");
        assertThat(references[0]).as("only the test's reference is left").isEqualTo(1);
        CL.clReleaseEvent(command);
    }

    @Test
    void closeWaitsForEveryCommandAndEveryDependentActionEvenWhenInterrupted() throws Exception {
        cl_event command = command();
        AtomicBoolean dependentRan = new AtomicBoolean();
        CompletableFuture<Void> done = completions.completion(command, "the last kernel");
        done.thenRun(() -> {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            dependentRan.set(true);
        });
        Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            end(command, CL.CL_COMPLETE);
        });

        Thread.currentThread().interrupt();
        long start = System.nanoTime();
        boolean settled = completions.close(Duration.ofSeconds(10));
        boolean interrupted = Thread.interrupted();
        completions = null;

        assertThat(settled).isTrue();
        assertThat(interrupted).as("the interrupt is kept for the caller").isTrue();
        assertThat(System.nanoTime() - start).isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(150));
        assertThat(done).isDone();
        assertThat(dependentRan).as("the dependent action ran before close returned").isTrue();
    }

    @Test
    void aDependentActionThatClosesWaitsForTheOtherActionsButNotForItself() throws Exception {
        cl_event held = command();
        CountDownLatch heldRunning = new CountDownLatch(1);
        CountDownLatch closeStarted = new CountDownLatch(1);
        AtomicBoolean heldEnded = new AtomicBoolean();
        completions.completion(held, "a kernel").thenRun(() -> {
            heldRunning.countDown();
            try {
                closeStarted.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            heldEnded.set(true);
        });
        end(held, CL.CL_COMPLETE);
        heldRunning.await(); // handed in after it: on the in-order queue a later command's end would complete it too
        cl_event closing = command();
        EventCompletions closed = completions;
        CompletableFuture<Boolean> settledInside = new CompletableFuture<>();
        CompletableFuture<Boolean> heldEndedFirst = new CompletableFuture<>();
        completions.completion(closing, "a copy").thenRun(() -> {
            closeStarted.countDown();
            settledInside.complete(closed.close(Duration.ofSeconds(5)));
            heldEndedFirst.complete(heldEnded.get());
        });
        end(closing, CL.CL_COMPLETE);

        assertThat(settledInside.get(20, TimeUnit.SECONDS)).as("a close in an action settles: it is no other action's wait").isTrue();
        assertThat(heldEndedFirst.get(20, TimeUnit.SECONDS)).as("the other action ended before the close returned").isTrue();
        completions = null;
    }

    @Test
    void anActionRunOnTheWaiterThatClosesSettlesWithoutWaitingForItself() throws Exception {
        // hides its dependent from the count, as the waiter sees an action attached in the instant it completes a future
        CompletableFuture<Void> covered = new CompletableFuture<>() {
            @Override
            public int getNumberOfDependents() {
                return 0;
            }
        };
        cl_event closing = command();
        completions.completion(closing, "a copy", List.of(covered));
        EventCompletions closed = completions;
        AtomicReference<String> ranOn = new AtomicReference<>();
        CompletableFuture<Boolean> settledInside = new CompletableFuture<>();
        covered.thenRun(() -> {
            ranOn.set(Thread.currentThread().getName());
            settledInside.complete(closed.close(Duration.ofSeconds(20)));
        });
        end(closing, CL.CL_COMPLETE);

        assertThat(settledInside.get(10, TimeUnit.SECONDS)).as("a close on the waiter settles: it is no wait of its own").isTrue();
        assertThat(ranOn.get()).as("the action ran on the waiter").startsWith("opencl-events ");
        completions = null;
    }

    @Test
    void closeWaitsForADependentActionThatBlocksNoLongerThanItsBoundAndSaysSo() throws Exception {
        cl_event command = command();
        CountDownLatch release = new CountDownLatch(1);
        CountDownLatch running = new CountDownLatch(1);
        completions.completion(command, "a kernel").thenRun(() -> {
            running.countDown();
            try {
                release.await(); // the application's action, blocked on something of its own
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        end(command, CL.CL_COMPLETE);
        assertThat(running.await(10, TimeUnit.SECONDS)).isTrue();

        long start = System.nanoTime();
        boolean settled = completions.close(Duration.ofMillis(200));
        long took = System.nanoTime() - start;
        release.countDown();
        completions = null;

        assertThat(settled).as("the action was still running").isFalse();
        assertThat(took).as("no longer than the bound, give or take").isBetween(TimeUnit.MILLISECONDS.toNanos(150), TimeUnit.SECONDS.toNanos(5));
    }
}
