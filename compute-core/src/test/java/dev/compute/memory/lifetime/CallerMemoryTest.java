package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.lang.foreign.Arena;
import java.lang.ref.WeakReference;
import java.net.URL;
import java.net.URLClassLoader;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** What a copy learns of the caller's segment keeps nothing of the thread that first asked. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CallerMemoryTest {

    /**
     * The first copy of a segment in a process (in a JVM of its own, so that it is the first) is made by a request
     * thread that carries an inheritable thread-local (a security context) and a class loader of its own (a web
     * application's): neither may stay reachable from the library once that thread has ended.
     */
    @Test
    void theFirstCopyingThreadsContextAndLoaderAreNotKept() throws Exception {
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(60), FirstCopy.class);

        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("context kept: false").contains("loader kept: false");
    }

    /** The child: one request thread's first copy, then whether its context and loader can still be reached. */
    public static final class FirstCopy {

        private static final InheritableThreadLocal<Object> CONTEXT = new InheritableThreadLocal<>();

        public static void main(String[] args) throws Exception {
            Object context = new Object();
            ClassLoader loader = new URLClassLoader(new URL[0], null);
            WeakReference<Object> contextSeen = new WeakReference<>(context);
            WeakReference<ClassLoader> loaderSeen = new WeakReference<>(loader);
            CONTEXT.set(context);
            Thread request = new Thread(() -> {
                try (Arena arena = Arena.ofShared()) {
                    CallerMemory.of(arena.allocate(8));
                }
            });
            CONTEXT.remove();
            request.setContextClassLoader(loader);
            request.start();
            request.join();
            context = null;
            loader = null;
            request = null;
            for (int i = 0; i < 50 && (contextSeen.get() != null || loaderSeen.get() != null); i++) {
                System.gc();
                Thread.sleep(20);
            }
            System.out.println("context kept: " + (contextSeen.get() != null));
            System.out.println("loader kept: " + (loaderSeen.get() != null));
        }
    }
}
