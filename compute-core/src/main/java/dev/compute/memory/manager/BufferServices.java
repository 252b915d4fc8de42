package dev.compute.memory.manager;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.BufferHost;
import dev.compute.memory.lifetime.ScopeRegistry;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.ComputeBackend;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/** What a manager's buffers get of it ({@link BufferHost}): its gate, backend, chains, figures and block returns. */
public final class BufferServices implements BufferHost {

    private static final System.Logger LOG = ManagerLog.logger();

    private final CallGate gate;
    private final ComputeBackend backend;
    private final LocationChains chains;
    private final BlockAllocation allocation;
    private final Duration deviceWaitTimeout;
    private final Duration closeTimeout;
    private final Compactor compactor;
    private final BlockReturns returns;

    public BufferServices(CallGate gate, ComputeBackend backend, LocationChains chains, BlockAllocation allocation, Compactor compactor,
                   BlockReturns returns, Duration deviceWaitTimeout, Duration closeTimeout) {
        this.gate = gate;
        this.backend = backend;
        this.chains = chains;
        this.allocation = allocation;
        this.compactor = compactor;
        this.returns = returns;
        this.deviceWaitTimeout = deviceWaitTimeout;
        this.closeTimeout = closeTimeout;
    }

    @Override
    public int enter(BufferCore buffer) {
        return gate.enter(buffer);
    }

    @Override
    public int enterToEnd() {
        return gate.enterAlways();
    }

    @Override
    public void exit(int call) {
        gate.exit(call);
    }

    @Override
    public boolean isClosed() {
        return gate.isClosed();
    }

    @Override
    public ComputeBackend backend() {
        return backend;
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return chains.hostAccessible(location);
    }

    @Override
    public void count(Transfer transfer, MemoryLocation location, long bytes) {
        LocationChain chain = chains.of(location);
        switch (transfer) {
            case HOST_TO_DEVICE -> chain.hostToDevice.add(bytes);
            case DEVICE_TO_HOST -> chain.deviceToHost.add(bytes);
            case DEVICE_TO_DEVICE -> chain.deviceToDevice.add(bytes);
        }
    }

    @Override
    public ScopeRegistry scopes() {
        return gate.scopes();
    }

    @Override
    public Duration deviceWaitTimeout() {
        return deviceWaitTimeout;
    }

    @Override
    public void awaitDeviceIdle() {
        if (!backend.awaitIdle(closeTimeout)) {
            LOG.log(System.Logger.Level.WARNING, "device work was still running after " + closeTimeout.toMillis()
                    + " ms while a device access that could not record its work ended");
        }
    }

    @Override
    public Block allocateMirror(long bytes) {
        int stripe = gate.enterAlways();
        try {
            MemoryLocation at = chains.mirrorLocation();
            return compactor.allocatingMirror(() -> allocation.block(chains.open(at), bytes, BlockAllocation.Failure.REPORT));
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Exception impossible) {
            throw new IllegalStateException(impossible);
        } finally {
            gate.exitQuietly(stripe);
        }
    }

    @Override
    public void release(MemoryLocation location, Block block, @Nullable Block mirror, CompletableFuture<?> inFlight) {
        returns.release(location, block, mirror, inFlight);
    }
}
