package dev.compute.memory.internal;

import java.util.concurrent.ThreadFactory;

/**
 * Threads of the library's own (waiters, sweepers, copiers, the leak detector's cleaner), which are often started on
 * demand by whichever thread first needs one (a request's) and then live for a manager's or the process's life. A new
 * thread takes the inheritable thread-locals and the context class loader of the thread that makes it: these take
 * neither, so that they keep no request's context (a security context, an MDC) and no application's class loader
 * reachable for as long as they live. Their context class loader is the library's own.
 */
public final class LibraryThreads {

    private LibraryThreads() {}

    /** Daemon platform threads named {@code name} (with a counter from 0 where {@code numbered}). */
    public static ThreadFactory daemons(String name, boolean numbered) {
        Thread.Builder.OfPlatform builder = Thread.ofPlatform().daemon().inheritInheritableThreadLocals(false);
        ThreadFactory factory = (numbered ? builder.name(name, 0) : builder.name(name)).factory();
        return task -> withOwnLoader(factory.newThread(task));
    }

    /** One daemon platform thread named {@code name} running {@code task}, not started. */
    public static Thread daemon(String name, Runnable task) {
        return withOwnLoader(Thread.ofPlatform().daemon().inheritInheritableThreadLocals(false).name(name).unstarted(task));
    }

    /** Virtual threads named {@code name} with a counter from 0, taking no inheritable thread-locals. */
    public static ThreadFactory virtual(String name) {
        ThreadFactory factory = Thread.ofVirtual().inheritInheritableThreadLocals(false).name(name, 0).factory();
        return task -> withOwnLoader(factory.newThread(task));
    }

    /**
     * A thread that is never started: one that owns no confined arena, to ask whether a segment may be touched by a
     * thread other than its owner ({@code segment.isAccessibleBy(neverStarted)}). Held in a static field, it too must
     * keep nothing of the thread that made it.
     */
    public static Thread neverStarted() {
        return daemon("never started", () -> {});
    }

    private static Thread withOwnLoader(Thread thread) {
        thread.setContextClassLoader(LibraryThreads.class.getClassLoader());
        return thread;
    }
}
