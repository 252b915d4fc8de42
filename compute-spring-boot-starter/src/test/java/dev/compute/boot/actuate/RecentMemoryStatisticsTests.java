package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class RecentMemoryStatisticsTests {

    private static final long SECOND = 1_000_000_000L;

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20))
            .pinningEnabled(false).timelineInterval(Duration.ZERO).build();
    private final AtomicLong now = new AtomicLong();
    private final RecentMemoryStatistics recent = new RecentMemoryStatistics(manager, Duration.ofSeconds(1), now::get);

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void figuresAreCollectedAgainOnlyOnceTheyAreASecondOld() {
        MemoryStatistics collected = recent.statistics(MemoryLocation.DEVICE);
        try (UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE)) {
            now.set(SECOND - 1);
            assertThat(recent.statistics(MemoryLocation.DEVICE)).as("a collection not yet a second old").isSameAs(collected);
            assertThat(recent.statistics()).containsEntry(MemoryLocation.DEVICE, collected).containsOnlyKeys(manager.locations());

            now.set(SECOND);
            MemoryStatistics recollected = recent.statistics(MemoryLocation.DEVICE);
            assertThat(recollected.liveBuffers()).isEqualTo(1);
            assertThat(recollected).isEqualTo(manager.statistics(MemoryLocation.DEVICE));
        }
    }

    @Test
    void aRefreshCollectsNowForTheReadersAfterIt() {
        recent.statistics();
        try (UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST)) {
            assertThat(recent.refresh().get(MemoryLocation.HOST).liveBuffers()).isEqualTo(1);
            assertThat(recent.statistics(MemoryLocation.HOST).liveBuffers()).isEqualTo(1);
        }
    }

    /**
     * Figures collected while the manager was open are not handed out once it is closed, however young: the endpoint
     * said {@code "closed": true} beside the live buffers and reserved bytes the close had just freed, for up to a second.
     */
    @Test
    void aCollectionMadeBeforeTheManagerClosedIsNotHandedOutAfter() {
        UnifiedBuffer open = manager.allocate(1 << 20, MemoryLocation.DEVICE);
        assertThat(recent.statistics(MemoryLocation.DEVICE).liveBuffers()).isEqualTo(1);

        manager.close();

        assertThat(open.isClosed()).isTrue();
        assertThat(recent.statistics(MemoryLocation.DEVICE)).as("what the close left, not what was open before it")
                .isEqualTo(manager.statistics(MemoryLocation.DEVICE)).extracting(MemoryStatistics::liveBuffers, MemoryStatistics::reservedBytes)
                .containsExactly(0L, 0L);
    }

    /**
     * A collection made while the close waited for an access to end is not handed out once the close went on and freed
     * what it held: it said {@code "closed": true} beside a live buffer for up to a second after.
     */
    @Test
    void aCollectionMadeWhileTheCloseWaitedIsNotHandedOutOnceItFreed() throws Exception {
        UnifiedBuffer open = manager.allocate(1 << 20, MemoryLocation.DEVICE);
        BufferAccess access = open.hostAccess(AccessMode.READ_WRITE);
        Thread closing = Thread.ofPlatform().start(manager::close);
        long deadline = System.nanoTime() + 10 * SECOND;
        while (!manager.isClosed() && System.nanoTime() < deadline) {
            Thread.onSpinWait();
        }
        assertThat(recent.statistics(MemoryLocation.DEVICE).liveBuffers()).as("while the close waits for the access").isEqualTo(1);

        access.close();
        assertThat(closing.join(Duration.ofSeconds(10))).isTrue();

        assertThat(open.isClosed()).isTrue();
        assertThat(recent.statistics(MemoryLocation.DEVICE)).as("what the close left, not what it waited with")
                .extracting(MemoryStatistics::liveBuffers, MemoryStatistics::reservedBytes).containsExactly(0L, 0L);
        assertThat(recent.statistics()).as("kept, once nothing is left that the close may free").isSameAs(recent.statistics());
    }

    /**
     * A device query that does not return (a driver stuck) holds up no reader of the pool's figures, which need no
     * driver: both were read under one lock, so one stuck query stopped the endpoint, health and every meter of the
     * manager, whose scrapes then hung too.
     */
    @Test
    void aDeviceQueryThatDoesNotReturnHoldsUpNoReaderOfThePoolsFigures() throws Exception {
        CountDownLatch asked = new CountDownLatch(1);
        CountDownLatch answer = new CountDownLatch(1);
        UnifiedMemoryManager stuckDriver = (UnifiedMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {UnifiedMemoryManager.class}, (proxy, method, args) -> {
                    if (method.getName().equals("deviceMemory")) {
                        asked.countDown();
                        answer.await();
                    }
                    try {
                        return method.invoke(manager, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        RecentMemoryStatistics figures = new RecentMemoryStatistics(stuckDriver, Duration.ofSeconds(1), now::get);
        Thread asking = Thread.ofPlatform().start(figures::deviceMemory);
        try (UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE)) {
            assertThat(asked.await(10, TimeUnit.SECONDS)).isTrue();
            assertTimeoutPreemptively(Duration.ofSeconds(10), () -> assertThat(figures.statistics(MemoryLocation.DEVICE).liveBuffers()).isEqualTo(1),
                    "the pool's figures waited for the device query");
        } finally {
            answer.countDown();
            assertThat(asking.join(Duration.ofSeconds(10))).isTrue();
        }
        assertThat(figures.deviceMemory()).isEqualTo(manager.deviceMemory());
    }

    @Test
    void aLocationTheManagerDoesNotHaveIsRefused() {
        assertThatThrownBy(() -> recent.statistics(MemoryLocation.PINNED)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("PINNED memory is not available");
    }
}
