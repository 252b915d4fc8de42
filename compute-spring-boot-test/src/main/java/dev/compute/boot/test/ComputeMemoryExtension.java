package dev.compute.boot.test;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.memory.LiveBufferReport;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.AfterTestExecutionCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.BeforeTestExecutionCallback;
import org.junit.jupiter.api.extension.DynamicTestInvocationContext;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.InvocationInterceptor;
import org.junit.platform.commons.support.AnnotationSupport;
import org.springframework.beans.factory.BeanFactoryUtils;
import org.springframework.context.ApplicationContext;
import org.springframework.test.context.junit.jupiter.SpringExtension;

/**
 * Fails a test that leaves compute memory open: every buffer a watched manager has open after the test method that
 * it did not have open before must have been closed, and no buffer may have been found garbage-collected without
 * {@code close()} in between, beyond those open before it (a buffer that an earlier test failed leaving open is that
 * test's failure alone); nor may a budget it made stay open, nor a recording it started keep running (a reservation
 * left holds the pool's memory, a recording left refuses the next test's). The failure names the manager and, under
 * leak detection {@code paranoid} (which
 * {@link AutoConfigureComputeMemory} sets), where the buffers were allocated: grouped by call site, each cut to
 * the application's first frames.
 *
 * <p>In a Spring test ({@code @SpringBootTest}, {@code @WebMvcTest}, ...) {@code @ExtendWith(ComputeMemoryExtension.class)}
 * watches every {@link UnifiedMemoryManager} bean of the test's application context and its parents. In a plain unit
 * test, register the manager: {@code @RegisterExtension ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);}.
 *
 * <p>The check runs right after the test method, before {@code @AfterEach} methods: buffers a {@code @BeforeEach}
 * method opened are the test's fixture, not counted, and a manager that {@code @AfterEach} closes is checked while
 * still open. Buffers that other threads are still closing (a server thread finishing a request, device work still
 * running) are waited for up to {@link #SETTLE_TIMEOUT} before the test fails.
 *
 * <p>Tests that watch one manager take turns, whatever JUnit's parallel execution says: a buffer opened by a server's
 * thread, or found garbage-collected, cannot be told to be one test's rather than another's while both run. Each test
 * method (with its {@code @BeforeEach} and {@code @AfterEach}) waits for the turn of each manager it watches, taken in
 * one order so that tests watching several cannot wait for each other, for up to {@link #TURN_TIMEOUT}; tests on
 * other managers (another Spring context) still run beside it. Buffers that a {@code @BeforeAll} method opens while
 * another class's test runs on the same manager are counted as that test's: run such classes one at a time
 * ({@code junit.jupiter.execution.parallel.mode.classes.default=same_thread}, or one {@code @ResourceLock} on each).
 */
public final class ComputeMemoryExtension implements BeforeEachCallback, BeforeTestExecutionCallback, AfterTestExecutionCallback,
        AfterEachCallback, InvocationInterceptor {

    /** How long buffers that other threads are closing get before the test fails: far longer than a request's end takes, on a loaded CI machine too. */
    public static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(10);

    /** How long a test waits for its turn on a manager that another test watches before it fails saying so. */
    public static final Duration TURN_TIMEOUT = Duration.ofMinutes(10);

    /** Each manager's turn, and the order in which a test takes them; weak, so that a closed context's manager goes. */
    private static final Map<UnifiedMemoryManager, Turn> TURNS = Collections.synchronizedMap(new WeakHashMap<>());
    private static final AtomicLong TURNS_MADE = new AtomicLong();

    private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(ComputeMemoryExtension.class);

    private final @Nullable Supplier<? extends @Nullable UnifiedMemoryManager> watched;

    /** Watches the managers of the test's Spring application context; what {@code @ExtendWith} makes. */
    public ComputeMemoryExtension() {
        this.watched = null;
    }

    private ComputeMemoryExtension(Supplier<? extends @Nullable UnifiedMemoryManager> watched) {
        this.watched = watched;
    }

    /** Watches the manager {@code manager} gives when each test starts, for tests without a Spring context. */
    public static ComputeMemoryExtension watching(Supplier<? extends @Nullable UnifiedMemoryManager> manager) {
        if (manager == null) {
            // else it would be the extension that @ExtendWith makes, and look for a Spring context the test does not have
            throw new IllegalArgumentException("ComputeMemoryExtension.watching needs a supplier of the manager to watch, not null: watching(() -> manager)");
        }
        return new ComputeMemoryExtension(manager);
    }

    @Override
    public void beforeEach(ExtensionContext context) throws InterruptedException {
        Map<String, UnifiedMemoryManager> managers;
        try {
            managers = managers(context);
        } catch (ExtensionConfigurationException notYet) { // told as the test starts; a watched manager @BeforeEach makes
            return;
        }
        context.getStore(NAMESPACE).put(Turns.class, new Turns(takeTurns(managers)));
    }

    @Override
    public void beforeTestExecution(ExtensionContext context) throws InterruptedException {
        Map<String, UnifiedMemoryManager> managers = managers(context);
        List<Turn> turns = takeTurns(managers); // again (the locks count), for a watched manager that @BeforeEach made
        ExtensionContext.Store store = context.getStore(NAMESPACE);
        store.getOrComputeIfAbsent(Turns.class, key -> new Turns(new ArrayList<>()), Turns.class).held().addAll(turns);
        List<Baseline> baselines = new ArrayList<>();
        managers.forEach((name, manager) -> baselines.add(Baseline.take(name, manager)));
        store.put(Baselines.class, new Baselines(baselines));
    }

    @Override
    public void afterTestExecution(ExtensionContext context) {
        Baselines before = context.getStore(NAMESPACE).remove(Baselines.class, Baselines.class);
        if (before == null) {
            return;
        }
        List<String> problems = problemsSince(before.baselines());
        if (!problems.isEmpty()) {
            throw new AssertionError(String.join("\n\n", problems));
        }
    }

    private static List<String> problemsSince(List<Baseline> baselines) {
        List<String> problems = new ArrayList<>();
        for (Baseline baseline : baselines) {
            String problem = baseline.problemAfterTest();
            if (problem != null) {
                problems.add(problem);
            }
        }
        return problems;
    }

    /**
     * A {@code @TestFactory}'s dynamic tests run within its method, which JUnit surrounds with the callbacks, not each of
     * them: each is checked here as it ends, and fails itself, and the factory's baselines move past it, so that the
     * factory fails only for what it left itself.
     */
    @Override
    public void interceptDynamicTest(Invocation<@Nullable Void> invocation, DynamicTestInvocationContext invocationContext,
            ExtensionContext context) throws Throwable {
        Baselines factory = context.getStore(NAMESPACE).get(Baselines.class, Baselines.class);
        if (factory == null) {
            invocation.proceed();
            return;
        }
        List<Baseline> before = factory.baselines().stream().map(each -> Baseline.take(each.name(), each.manager())).toList();
        Throwable failed = null;
        try {
            invocation.proceed();
        } catch (Throwable e) {
            failed = e;
        }
        List<String> problems = problemsSince(before);
        factory.baselines().replaceAll(each -> Baseline.take(each.name(), each.manager()));
        if (failed != null) {
            if (!problems.isEmpty()) {
                failed.addSuppressed(new AssertionError(String.join("\n\n", problems)));
            }
            throw failed;
        }
        if (!problems.isEmpty()) {
            throw new AssertionError(String.join("\n\n", problems));
        }
    }

    @Override
    public void afterEach(ExtensionContext context) {
        Turns turns = context.getStore(NAMESPACE).remove(Turns.class, Turns.class);
        if (turns != null) {
            giveBack(turns.held());
        }
    }

    /** Waits for the turn of each manager, in the order their turns were made; none held where one is not had in time. */
    private static List<Turn> takeTurns(Map<String, UnifiedMemoryManager> managers) throws InterruptedException {
        List<Map.Entry<String, Turn>> wanted = new ArrayList<>();
        managers.forEach((name, manager) -> wanted.add(Map.entry(name, TURNS.computeIfAbsent(manager,
                key -> new Turn(TURNS_MADE.incrementAndGet(), new ReentrantLock())))));
        wanted.sort(Comparator.comparingLong(entry -> entry.getValue().order()));
        List<Turn> taken = new ArrayList<>();
        try {
            for (Map.Entry<String, Turn> each : wanted) {
                if (!each.getValue().lock().tryLock(TURN_TIMEOUT.toNanos(), TimeUnit.NANOSECONDS)) {
                    throw new AssertionError("waited " + TURN_TIMEOUT.toMinutes() + " minutes for another test watching " + each.getKey()
                            + " to end: tests that watch one manager take turns (their buffers cannot be told apart while both run)");
                }
                taken.add(each.getValue());
            }
            return taken;
        } catch (InterruptedException | RuntimeException | Error failure) {
            giveBack(taken);
            throw failure;
        }
    }

    private static void giveBack(List<Turn> turns) {
        for (int i = turns.size() - 1; i >= 0; i--) {
            turns.get(i).lock().unlock();
        }
    }

    /** A manager's turn: a lock held from a test's start to the end of its check, reentrant for a test run inside a test. */
    private record Turn(long order, ReentrantLock lock) {}

    private Map<String, UnifiedMemoryManager> managers(ExtensionContext context) {
        if (watched != null) {
            UnifiedMemoryManager manager = watched.get();
            if (manager == null) {
                throw new ExtensionConfigurationException("ComputeMemoryExtension.watching(...) gave no manager when the test "
                        + "started: create it before the test method runs (in a field initializer, @BeforeAll or @BeforeEach)");
            }
            return Map.of("the watched manager", manager);
        }
        if (!isSpringTest(context.getRequiredTestClass())) {
            throw new ExtensionConfigurationException(context.getRequiredTestClass().getName() + " has no Spring application "
                    + "context to find managers in: use it on a Spring test (@SpringBootTest, @WebMvcTest, ...), or register a "
                    + "manager with @RegisterExtension ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager)");
        }
        // and those of its ancestors (@ContextHierarchy): a manager in a parent context that child contexts share is theirs to inject
        ApplicationContext applicationContext = SpringExtension.getApplicationContext(context);
        Map<String, UnifiedMemoryManager> managers = BeanFactoryUtils.beansOfTypeIncludingAncestors(applicationContext, UnifiedMemoryManager.class);
        // the starter off leaves @AutoConfigureComputeMemory nothing to replace: asking for the annotation would send the reader in circles
        if (managers.isEmpty() && !applicationContext.getEnvironment().getProperty(ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, Boolean.class, true)) {
            throw new ExtensionConfigurationException("the application context of " + context.getRequiredTestClass().getName()
                    + " has no UnifiedMemoryManager bean: " + ComputeMemoryAutoConfiguration.ENABLED_PROPERTY + " is false there, which "
                    + "turns the starter off and with it the test's manager; set " + ComputeMemoryAutoConfiguration.ENABLED_PROPERTY
                    + "=true in the test's properties to watch its memory");
        }
        if (managers.isEmpty()) {
            throw new ExtensionConfigurationException("the application context of " + context.getRequiredTestClass().getName()
                    + " has no UnifiedMemoryManager bean: a slice test (@WebMvcTest, ...) gets one with @AutoConfigureComputeMemory");
        }
        // a manager under several bean names (a @Bean that returns another) is checked once, or its buffers are told twice
        Set<UnifiedMemoryManager> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        Map<String, UnifiedMemoryManager> distinct = new LinkedHashMap<>();
        managers.forEach((name, manager) -> {
            if (seen.add(manager)) {
                distinct.put(name, manager);
            }
        });
        return distinct;
    }

    // SpringExtension is registered by @ExtendWith, mostly through @SpringBootTest or a slice annotation; a @Nested class has it from its enclosing class.
    private static boolean isSpringTest(Class<?> testClass) {
        for (Class<?> type = testClass; type != null; type = isInner(type) ? type.getEnclosingClass() : null) {
            boolean registered = AnnotationSupport.findRepeatableAnnotations(type, ExtendWith.class).stream()
                    .anyMatch(extendWith -> Arrays.asList(extendWith.value()).contains(SpringExtension.class));
            if (registered) {
                return true;
            }
        }
        return false;
    }

    private static boolean isInner(Class<?> type) {
        return type.isMemberClass() && !Modifier.isStatic(type.getModifiers());
    }

    private record Baselines(List<Baseline> baselines) {}

    /** The turns a test holds, from before its {@code @BeforeEach} methods to after its {@code @AfterEach} ones. */
    private record Turns(List<Turn> held) {}

    /** A manager's open buffers, counted by report, its leak count, its open budgets and whether it recorded, when the test started. */
    private record Baseline(String name, UnifiedMemoryManager manager, Map<LiveBufferReport, Integer> open, long leaks,
            Set<MemoryBudget> budgets, boolean recording) {

        static Baseline take(String name, UnifiedMemoryManager manager) {
            Map<LiveBufferReport, Integer> open = new HashMap<>();
            manager.liveBuffers().forEach(buffer -> open.merge(buffer, 1, Integer::sum));
            return new Baseline(name, manager, open, manager.leaksDetected(), openBudgets(manager), manager.isRecording());
        }

        /** Every budget open now, those under others too (a request's under its tenant's). */
        private static Set<MemoryBudget> openBudgets(UnifiedMemoryManager manager) {
            Set<MemoryBudget> open = Collections.newSetFromMap(new IdentityHashMap<>());
            Deque<MemoryBudget> toVisit = new ArrayDeque<>(manager.budgets());
            while (!toVisit.isEmpty()) {
                MemoryBudget budget = toVisit.pop();
                if (!budget.isClosed() && open.add(budget)) {
                    toVisit.addAll(budget.children());
                }
            }
            return open;
        }

        /** The budgets open now that were not open at the start. */
        private List<MemoryBudget> budgetsMadeSince() {
            return openBudgets(manager).stream().filter(budget -> !budgets.contains(budget)).toList();
        }

        @Nullable String problemAfterTest() {
            // an interrupt the test left behind (a @Timeout's, its own) must not end the check in an InterruptedException
            // that hides the buffers it left open; one during the wait ends the wait alone. Either is put back after.
            boolean leftInterrupted = Thread.interrupted();
            boolean interruptedWaiting = false;
            long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
            List<LiveBufferReport> opened = openedSince(manager.liveBuffers());
            List<MemoryBudget> made = budgetsMadeSince(); // a request's budget closes as its request ends, on the server's thread
            while ((!opened.isEmpty() || !made.isEmpty()) && !interruptedWaiting && System.nanoTime() < deadline) {
                try {
                    Thread.sleep(10);
                } catch (InterruptedException duringTheWait) {
                    interruptedWaiting = true;
                }
                opened = openedSince(manager.liveBuffers());
                made = budgetsMadeSince();
            }
            if (leftInterrupted || interruptedWaiting) {
                Thread.currentThread().interrupt();
            }
            // counted before the buffers are listed: a leak counted has its buffer off the list (its memory is back)
            long leaked = manager.leaksDetected() - leaks;
            List<LiveBufferReport> live = manager.liveBuffers();
            opened = openedSince(live);
            // a buffer open before the test that is gone now was no leak of this test's, even when garbage-collected: one
            // that an earlier test failed midway leaving open must not fail each test that runs when the GC finds it
            long goneSinceStart = open.values().stream().mapToLong(Integer::longValue).sum() - (live.size() - opened.size());
            leaked = Math.max(0, leaked - goneSinceStart);
            List<String> problems = new ArrayList<>();
            if (!opened.isEmpty()) {
                problems.add(describeOpen(opened));
            }
            if (leaked > 0) {
                problems.add(name + " found " + leaked + " buffer(s) garbage-collected without close() during this test; "
                        + "the log's LEAK lines say where each was allocated");
            }
            // a reservation left holds the pool's memory, and a recording left refuses the next test's: both fail another test
            made = budgetsMadeSince();
            if (!made.isEmpty()) {
                problems.add(name + " has " + made.size() + " budget(s) open that this test made and did not close: "
                        + made.stream().map(budget -> "'" + budget.path() + "'").collect(Collectors.joining(", "))
                        + "; close each one (try-with-resources) before the test ends");
            }
            // a manager the test closed keeps saying it records, as it keeps nothing else: closing it ended the recording's use
            if (!recording && manager.isRecording() && !manager.isClosed()) {
                problems.add(name + " is recording: this test started a recording and did not stop it; call stopRecording() before the test ends");
            }
            return problems.isEmpty() ? null : String.join("\n", problems);
        }

        /** The buffers open now beyond those open at the start: of each report, as many as there are more of. */
        private List<LiveBufferReport> openedSince(List<LiveBufferReport> live) {
            Map<LiveBufferReport, Integer> before = new HashMap<>(open);
            List<LiveBufferReport> opened = new ArrayList<>();
            for (LiveBufferReport buffer : live) {
                if (before.merge(buffer, -1, Integer::sum) < 0) {
                    opened.add(buffer);
                }
            }
            return opened;
        }

        private String describeOpen(List<LiveBufferReport> opened) {
            long bytes = opened.stream().mapToLong(LiveBufferReport::sizeBytes).sum();
            return name + " (" + manager.backendInfo().backend() + ") has " + opened.size() + " buffer(s) of " + bytes
                    + " bytes open that this test opened and did not close; close each one (try-with-resources) before the test ends."
                    + OpenBuffersReport.sites(opened);
        }
    }
}
