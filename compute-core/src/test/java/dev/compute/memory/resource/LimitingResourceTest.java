package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.resource.pool.CachingPoolResource;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class LimitingResourceTest extends MemoryResourceContract {

    @Override
    protected MemoryResource create(BackendResource upstream) {
        return new LimitingResource(upstream, MemoryLocation.DEVICE, LIMIT, "the test's budget");
    }

    private LimitingResource overPool(long limit) {
        return new LimitingResource(new CachingPoolResource(backendResource(backend), PoolSettings.expandable(), MemoryEventListener.NONE),
                MemoryLocation.DEVICE, limit, "tenant-a budget");
    }

    @Test
    void aBudgetBelowTheCapRefusesAsTheAdaptorsLimitNamingIt() {
        try (LimitingResource budget = overPool(MiB)) {
            Block first = budget.allocate(600_000);
            assertThat(budget.allocatedBytes()).as("the pool's rounded size is counted").isEqualTo(first.size());

            assertThatThrownBy(() -> budget.allocate(600_000)).isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                    e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.ADAPTOR_LIMIT)).hasMessageContaining("tenant-a budget");
            assertThat(budget.allocatedBytes()).as("a refusal counts nothing").isEqualTo(first.size());

            budget.deallocate(first);
            assertThat(budget.allocatedBytes()).isZero();
            budget.deallocate(budget.allocate(600_000));
        }
    }

    @Test
    void threadsAllocatingAtOnceNeverPassTheLimitTogether() throws InterruptedException {
        try (LimitingResource budget = overPool(64 * 4096)) {
            AtomicLong held = new AtomicLong();
            AtomicLong most = new AtomicLong();
            ConcurrentLinkedQueue<Block> blocks = new ConcurrentLinkedQueue<>();
            CountDownLatch start = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                threads.add(Thread.ofPlatform().start(() -> {
                    try {
                        start.await();
                    } catch (InterruptedException e) {
                        return;
                    }
                    for (int i = 0; i < 5_000; i++) {
                        try {
                            Block block = budget.allocate(4096);
                            most.accumulateAndGet(held.addAndGet(block.size()), Math::max);
                            blocks.add(block);
                        } catch (DeviceOutOfMemoryException full) {
                            Block some = blocks.poll();
                            if (some != null) {
                                held.addAndGet(-some.size());
                                budget.deallocate(some);
                            }
                        }
                    }
                }));
            }
            start.countDown();
            for (Thread thread : threads) {
                thread.join();
            }
            assertThat(most.get()).as("bytes held at once").isLessThanOrEqualTo(64 * 4096);
            blocks.forEach(budget::deallocate);
            assertThat(budget.allocatedBytes()).isZero();
        }
    }
}
