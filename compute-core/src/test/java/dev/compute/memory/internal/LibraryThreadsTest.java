package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The library's threads, often started by whichever thread first needs one (a request's) and then long-lived, keep
 * nothing of that thread: not its inheritable thread-locals (a security context, an MDC), not its class loader.
 */
class LibraryThreadsTest {

    private static final InheritableThreadLocal<String> REQUEST = new InheritableThreadLocal<>();

    @Test
    void threadsMadeOnARequestsThreadKeepNeitherItsContextNorItsLoader() throws Exception {
        ClassLoader applications = new URLClassLoader(new URL[0], null);
        List<Thread> made = new ArrayList<>();
        Thread request = Thread.ofPlatform().start(() -> {
            REQUEST.set("user-42");
            Thread.currentThread().setContextClassLoader(applications);
            made.add(LibraryThreads.daemons("test-daemons-", true).newThread(() -> {}));
            made.add(LibraryThreads.daemon("test-daemon", () -> {}));
            made.add(LibraryThreads.virtual("test-virtual-").newThread(() -> {}));
            made.add(LibraryThreads.neverStarted());
        });
        request.join();

        assertThat(made).allSatisfy(thread -> assertThat(thread.getContextClassLoader()).as(thread.getName())
                .isSameAs(LibraryThreads.class.getClassLoader()));
        // what a thread made there sees of the request's inheritable thread-local
        CompletableFuture<String> seen = new CompletableFuture<>();
        Thread.ofPlatform().start(() -> {
            REQUEST.set("user-42");
            LibraryThreads.daemon("reads-the-request", () -> seen.complete(String.valueOf(REQUEST.get()))).start();
        }).join();
        assertThat(seen.get(10, TimeUnit.SECONDS)).isEqualTo("null");
        assertThat(made).extracting(Thread::isDaemon).containsOnly(true);
    }
}
