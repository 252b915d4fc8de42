package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceTimeoutException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.WorkGroup;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Device work in flight on one root, over a backend that orders on the device only the futures it was told of and
 * where a later piece on the same "queue" supersedes an earlier one: what a host use waits for, what a device use
 * waits for, and the bounded wait.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class WorkInFlightTest {

    /** Work of the backend's own queue: ordered on the device, and a later piece supersedes an earlier one. */
    static final class Queued extends CompletableFuture<Void> {}

    /** A backend that answers only what work in flight asks of it. */
    private static final ComputeBackend ORDERING = (ComputeBackend) Proxy.newProxyInstance(
            ComputeBackend.class.getClassLoader(), new Class<?>[] {ComputeBackend.class}, (proxy, method, args) -> switch (method.getName()) {
                case "orderAfter" -> args[0] instanceof Queued;
                case "supersedes" -> args[0] instanceof Queued && args[1] instanceof Queued;
                default -> throw new UnsupportedOperationException(method.getName());
            });

    private final WorkInFlight work = new WorkInFlight(ORDERING);

    @Test
    void doneWorkIsForgottenAndNothingPendingIsNull() {
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        work.add(kernel);
        assertThat(work.pending()).isSameAs(kernel);
        assertThat(work.isDone()).isFalse();

        kernel.complete(null);

        assertThat(work.isDone()).isTrue();
        assertThat(work.pending()).isNull();
        assertThat(work.all()).isDone();
    }

    @Test
    void aLaterPieceOnTheSameQueueSupersedesTheEarlierOneAndOthersAreKeptApart() {
        Queued first = new Queued();
        Queued second = new Queued();
        CompletableFuture<Void> foreign = new CompletableFuture<>();
        work.add(first);
        work.add(foreign);
        work.add(second);

        CompletableFuture<?> all = work.all();
        second.complete(null);
        assertThat(all).as("the first is no longer waited for: the queue runs it before the second").isNotDone();
        foreign.complete(null);
        assertThat(all).isDone();
        assertThat(first).as("never completed, yet not waited for").isNotDone();
    }

    @Test
    void aDeviceUseWaitsOnTheHostOnlyForWhatTheBackendCannotOrder() {
        Queued queued = new Queued();
        CompletableFuture<Void> foreign = new CompletableFuture<>();
        CompletableFuture<Void> foreign2 = new CompletableFuture<>();
        work.add(queued);
        assertThat(work.unordered()).as("ordered on the device").isNull();

        work.add(foreign);
        assertThat(work.unordered()).isSameAs(foreign);

        work.add(foreign2);
        CompletableFuture<?> unordered = work.unordered();
        foreign.complete(null);
        assertThat(unordered).isNotDone();
        foreign2.complete(null);
        assertThat(unordered).isDone();
    }

    @Test
    void aGroupIsKeptAsItsPiecesThatAreNotDone() {
        CompletableFuture<Void> done = CompletableFuture.completedFuture(null);
        CompletableFuture<Void> foreign = new CompletableFuture<>();
        Queued queued = new Queued();
        work.add(WorkGroup.of(List.of(done, foreign, queued)));

        assertThat(work.unordered()).as("the queued piece is ordered on the device").isSameAs(foreign);
        foreign.complete(null);
        assertThat(work.pending()).isSameAs(queued);
    }

    @Test
    void theWaitIsBoundedAndFailedWorkIsOverToo() {
        CompletableFuture<Void> failed = CompletableFuture.failedFuture(new IllegalStateException("the kernel faulted"));
        WorkInFlight.await(failed, Duration.ofSeconds(1), "buffer");
        CompletableFuture<Void> cancelled = new CompletableFuture<>();
        cancelled.cancel(false);
        WorkInFlight.await(cancelled, Duration.ofSeconds(1), "buffer");

        assertThatThrownBy(() -> WorkInFlight.await(new CompletableFuture<>(), Duration.ofMillis(50), "buffer B"))
                .isInstanceOf(DeviceTimeoutException.class)
                .hasMessageStartingWith("device work queued on buffer B did not finish within 50 ms");
    }
}
