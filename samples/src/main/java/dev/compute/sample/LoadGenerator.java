package dev.compute.sample;

import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.DeviceWaitInterruptedException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.ApplicationListener;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.event.ContextClosedEvent;
import org.springframework.stereotype.Component;

/**
 * Makes the pool move so there is something to watch in Actuator and Grafana: one thread allocates FLOAT32
 * buffers of mixed sizes at every location the manager has, fills, scales and sums them, holds up to
 * {@code sample.load.max-live-buffers} and closes the oldest as it goes. Sizes come from a few classes, as real
 * workloads' do, so the cache gets hits. Starts with the application when {@code sample.load.enabled}; started
 * and stopped over {@code /api/load}. Stopping closes every buffer it holds.
 */
@Component
public class LoadGenerator implements SmartLifecycle, ApplicationListener<ContextClosedEvent> {

    private static final Logger LOG = LoggerFactory.getLogger(LoadGenerator.class);
    /** How long a stop waits for the worker, whose device waits end at its interrupt: under a graceful shutdown's 30 s. */
    private static final Duration STOP_WAIT = Duration.ofSeconds(20);

    public record Status(boolean running, long operations, long bytesAllocated, long outOfMemory, int liveBuffers) {}

    private final UnifiedMemoryManager manager;
    private final LoadProperties properties;
    private final AtomicLong operations = new AtomicLong();
    private final AtomicLong bytesAllocated = new AtomicLong();
    private final AtomicLong outOfMemory = new AtomicLong();
    private final ArrayDeque<UnifiedBuffer> held = new ArrayDeque<>();
    private @Nullable Thread worker;
    private volatile boolean running;
    // the context is closing: it stops this generator before the web server stops taking requests, so a start
    // arriving meanwhile would run the load on while the manager closes under it
    private volatile boolean closing;

    public LoadGenerator(UnifiedMemoryManager manager, LoadProperties properties) {
        this.manager = manager;
        this.properties = properties;
    }

    @Override
    public boolean isAutoStartup() {
        return properties.enabled();
    }

    @Override
    public synchronized void start() {
        if (running || closing) {
            return;
        }
        running = true;
        worker = Thread.ofPlatform().daemon().name("sample-load").start(this::run);
        LOG.info("load generator started: up to {} buffers of up to {}", properties.maxLiveBuffers(), properties.maxBufferSize());
    }

    @Override
    public synchronized void stop() {
        if (!running) {
            return;
        }
        running = false;
        Thread thread = worker;
        worker = null;
        if (thread != null) {
            thread.interrupt();
            try {
                // a stop never hangs the shutdown on a worker stuck where no interrupt reaches
                if (!thread.join(STOP_WAIT)) {
                    LOG.warn("load generator still running {} after it was told to stop; left to end on its own", STOP_WAIT);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        LOG.info("load generator stopped after {} operations", operations.get());
    }

    /** Published before the context stops its lifecycle beans: from then on, {@link #start()} starts nothing. */
    @Override
    public void onApplicationEvent(ContextClosedEvent event) {
        closing = true;
    }

    @Override
    public boolean isRunning() {
        return running;
    }

    // Before the manager closes (it is a bean this one depends on, so it closes after), so nothing held is reported as leaked.
    @Override
    public int getPhase() {
        return SmartLifecycle.DEFAULT_PHASE;
    }

    public Status status() {
        int live;
        synchronized (held) {
            live = held.size();
        }
        return new Status(running, operations.get(), bytesAllocated.get(), outOfMemory.get(), live);
    }

    private void run() {
        SplittableRandom random = new SplittableRandom();
        List<MemoryLocation> locations = manager.locations();
        long maxElements = properties.maxBufferSize().toBytes() / Float.BYTES;
        try {
            while (running && !Thread.currentThread().isInterrupted()) {
                step(random, locations, maxElements);
                if (!properties.pause().isZero()) {
                    Thread.sleep(properties.pause());
                }
            }
        } catch (InterruptedException | DeviceWaitInterruptedException e) {
            // stop() interrupts this thread: in its pause, or (OpenCL, CUDA) in an op's wait for the device, which gives
            // up, leaving the op queued; the step closed the buffer, and its memory goes back once the op has run
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            if (!manager.isClosed()) {
                LOG.error("load generator stopped by an error", e);
            }
        } finally {
            running = false;
            release();
        }
    }

    private void step(SplittableRandom random, List<MemoryLocation> locations, long maxElements) {
        // four size classes: small ones are frequent, the largest rare; within a class sizes vary a little
        long classSize = switch (random.nextInt(10)) {
            case 0 -> maxElements;
            case 1, 2 -> maxElements / 8;
            case 3, 4, 5 -> maxElements / 64;
            default -> maxElements / 512;
        };
        long elements = Math.max(1, classSize - random.nextLong(Math.max(1, classSize / 4)));
        MemoryLocation location = locations.get(random.nextInt(locations.size()));
        UnifiedBuffer buffer;
        try {
            buffer = manager.allocate(DataType.FLOAT32, elements, location);
        } catch (DeviceOutOfMemoryException e) {
            outOfMemory.incrementAndGet();
            closeOldest();
            return;
        }
        bytesAllocated.addAndGet(buffer.byteSize());
        try {
            manager.ops().fill(buffer, 1.0);
            manager.ops().scale(buffer, 0.5);
            manager.ops().sum(buffer);
        } catch (RuntimeException e) {
            buffer.close(); // not held yet: closed here, or the failure (a device timeout, say) would leak it
            throw e;
        }
        operations.incrementAndGet();
        synchronized (held) {
            held.addLast(buffer);
        }
        while (heldCount() > properties.maxLiveBuffers()) {
            closeOldest();
        }
    }

    private int heldCount() {
        synchronized (held) {
            return held.size();
        }
    }

    private void closeOldest() {
        UnifiedBuffer oldest;
        synchronized (held) {
            oldest = held.pollFirst();
        }
        if (oldest != null) {
            oldest.close();
        }
    }

    private void release() {
        synchronized (held) {
            held.forEach(UnifiedBuffer::close);
            held.clear();
        }
    }
}
