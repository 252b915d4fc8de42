package dev.compute.memory;

import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.NativeDevice;
import dev.compute.memory.spi.NativeKernel;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;

/**
 * A manager's {@link Kernels}: the kernels compiled for it, one per source, kept in the manager (never by the
 * device's address, which a later manager may be given), and the native device for code that builds its own. The
 * backend releases what it compiled when the manager closes it.
 */
final class ManagerKernels implements Kernels {

    private final PooledMemoryManager manager;
    /** One entry per source compiled or being compiled; a failed compile's entry is removed, so the next call retries. */
    private final ConcurrentHashMap<KernelSource, CompletableFuture<ComputeKernel>> compiled = new ConcurrentHashMap<>();
    /** Java kernels, while they are used ({@link #javaKernel}); under its own monitor. */
    private final Map<KernelSource, HeldWhileUsed> javaKernels = new HashMap<>();
    private final ReferenceQueue<ComputeKernel> collectedJavaKernels = new ReferenceQueue<>();

    ManagerKernels(PooledMemoryManager manager) {
        this.manager = manager;
    }

    @Override
    public ComputeKernel compile(KernelSource source, KernelSource... alternatives) {
        Objects.requireNonNull(source, "source");
        Objects.requireNonNull(alternatives, "alternatives");
        List<KernelSource> given = new ArrayList<>(alternatives.length + 1);
        given.add(source);
        for (KernelSource alternative : alternatives) {
            given.add(Objects.requireNonNull(alternative, "an alternative source is null"));
        }
        requireOpen("compile a kernel");
        ComputeBackend backend = manager.computeBackend();
        Set<KernelSource.Language> languages = backend.kernelLanguages();
        KernelSource chosen = given.stream().filter(s -> languages.contains(s.language())).findFirst()
                .orElseThrow(() -> new UnsupportedOperationException("the " + backend.info().backend() + " backend compiles kernels in "
                        + (languages.isEmpty() ? "no language" : languages) + ", and none of the sources given is: " + given
                        + (languages.isEmpty() ? "" : "; add a " + factory(languages.iterator().next()))));
        if (chosen.language() == KernelSource.Language.JAVA) {
            return javaKernel(backend, chosen);
        }
        CompletableFuture<ComputeKernel> mine = new CompletableFuture<>();
        CompletableFuture<ComputeKernel> earlier = compiled.putIfAbsent(chosen, mine);
        if (earlier != null) {
            return awaitCompile(earlier);
        }
        try {
            NativeKernel kernel = backend.compileKernel(chosen);
            ComputeKernel compiledKernel = new BackendKernel(manager, chosen, kernel);
            mine.complete(compiledKernel);
            return compiledKernel;
        } catch (RuntimeException | Error e) {
            compiled.remove(chosen, mine);
            mine.completeExceptionally(e);
            throw e;
        }
    }

    /**
     * A Java kernel: the same object for an equal source while someone holds it, made again (which costs nothing: the
     * body is the kernel) once nobody does. A body is compared by identity, so a lambda that captures a request's state
     * is a source of its own per request: kept for good, such kernels and what they capture would pile up.
     */
    private ComputeKernel javaKernel(ComputeBackend backend, KernelSource source) {
        synchronized (javaKernels) {
            for (Reference<? extends ComputeKernel> gone; (gone = collectedJavaKernels.poll()) != null; ) {
                javaKernels.remove(((HeldWhileUsed) gone).source, gone);
            }
            HeldWhileUsed kept = javaKernels.get(source);
            ComputeKernel kernel = kept == null ? null : kept.get();
            if (kernel == null) {
                kernel = new BackendKernel(manager, source, backend.compileKernel(source));
                javaKernels.put(source, new HeldWhileUsed(source, kernel, collectedJavaKernels));
            }
            return kernel;
        }
    }

    /** A Java kernel kept while its users hold it, with the source it is kept under, to take it out once collected. */
    private static final class HeldWhileUsed extends WeakReference<ComputeKernel> {
        final KernelSource source;

        HeldWhileUsed(KernelSource source, ComputeKernel kernel, ReferenceQueue<ComputeKernel> collected) {
            super(kernel, collected);
            this.source = source;
        }
    }

    private static String factory(KernelSource.Language language) {
        return switch (language) {
            case OPENCL_C -> "KernelSource.openCl(source, name)";
            case PTX -> "KernelSource.ptx(ptx, name)";
            case JAVA -> "KernelSource.java(name, body)";
        };
    }

    /** Another thread's compile of the same source: its kernel, or its failure. */
    private static ComputeKernel awaitCompile(CompletableFuture<ComputeKernel> compile) {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return compile.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof RuntimeException runtime) {
                        throw runtime;
                    }
                    if (cause instanceof Error error) {
                        throw error;
                    }
                    throw new CompletionException(cause);
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public Set<KernelSource.Language> languages() {
        return Set.copyOf(manager.computeBackend().kernelLanguages());
    }

    /** The backend's native device as {@code type}; see {@link UnifiedMemoryManager#nativeDevice}. */
    <T extends NativeDevice> T nativeDevice(Class<T> type) {
        Objects.requireNonNull(type, "type");
        requireOpen("hand out its native device");
        ComputeBackend backend = manager.computeBackend();
        NativeDevice device = backend.nativeDevice();
        if (!type.isInstance(device)) {
            throw new IllegalStateException("the " + backend.info().backend() + " backend has no " + type.getSimpleName()
                    + (device == null ? "; it has no native device objects (its memory is reached through host segments)"
                    : "; it hands out " + device.getClass().getSimpleName()));
        }
        return type.cast(device);
    }

    private void requireOpen(String what) {
        if (manager.isClosed()) {
            throw new IllegalStateException("this UnifiedMemoryManager is closed: it can no longer " + what);
        }
    }
}
