package dev.compute.boot.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.junit.jupiter.api.DynamicTest.dynamicTest;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.compute.boot.test.AutoConfigureComputeMemory.Replace;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.recording.RecordingOptions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Stream;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.ContextConfiguration;
import org.springframework.test.context.ContextHierarchy;
import org.springframework.test.context.junit.jupiter.SpringExtension;

/**
 * The extension on real test classes, run here through JUnit's {@link EngineTestKit}: the nested classes below are
 * those tests (Surefire leaves nested classes alone; only this class runs them).
 */
class ComputeMemoryExtensionTests {

    @Test
    void aTestThatLeavesABufferOpenFailsNamingWhereItWasAllocated() {
        Throwable failure = singleFailure(LeavesABufferOpen.class);
        assertThat(failure).isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("the watched manager (cpu) has 1 buffer(s) of 4096 bytes open that this test opened and did not close")
                .hasMessageContaining("1 buffer(s), 4096 bytes at HOST, allocated at:\n"
                        + "\tat dev.compute.boot.test.ComputeMemoryExtensionTests$LeavesABufferOpen.allocateAndKeep(ComputeMemoryExtensionTests.java:")
                .hasMessageContaining("\tat dev.compute.boot.test.ComputeMemoryExtensionTests$LeavesABufferOpen.keepsABuffer(")
                .hasMessageMatching("(?s).*\t\\.\\.\\. \\d+ more\n$");
    }

    @Test
    void aTestThatClosesWhatItOpensPassesAndSoDoesItsFixture() {
        run(ClosesWhatItOpens.class).assertStatistics(statistics -> statistics.started(2).succeeded(2).failed(0));
    }

    @Test
    void aBufferGarbageCollectedWithoutCloseFailsTheTest() {
        assertThat(singleFailure(DropsABuffer.class)).isInstanceOf(AssertionError.class)
                .hasMessage("the watched manager found 1 buffer(s) garbage-collected without close() during this test; "
                        + "the log's LEAK lines say where each was allocated");
    }

    @Test
    void aBufferThatAnEarlierTestLeftOpenFailsThatTestAloneWhenGarbageCollectedLater() {
        Events events = run(FailsMidwayThenAnotherRuns.class);
        events.assertStatistics(statistics -> statistics.started(2).succeeded(1).failed(1));
        Throwable failure = events.failed().stream().findFirst().orElseThrow()
                .getRequiredPayload(TestExecutionResult.class).getThrowable().orElseThrow();
        assertThat(failure).hasMessage("midway");
        // found open, or already garbage-collected while the check waited for it
        assertThat(failure.getSuppressed()).singleElement().isInstanceOf(AssertionError.class)
                .extracting(Throwable::getMessage).asString().startsWith("the watched manager ");
    }

    /** The check's wait for other threads' closes threw the InterruptedException of an interrupt the test left set. */
    @Test
    void aTestThatLeavesItsThreadInterruptedStillFailsNamingTheBufferItLeftOpen() {
        Events events = run(LeavesItsThreadInterrupted.class);
        events.assertStatistics(statistics -> statistics.started(2).succeeded(1).failed(1));
        Throwable failure = events.failed().stream().findFirst().orElseThrow()
                .getRequiredPayload(TestExecutionResult.class).getThrowable().orElseThrow();
        assertThat(failure).isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("the watched manager (cpu) has 1 buffer(s) of 64 bytes open")
                .hasMessageContaining("ComputeMemoryExtensionTests$LeavesItsThreadInterrupted.a_keepsABufferAndAnInterrupt(");
        assertThat(LeavesItsThreadInterrupted.interruptedAfterTheCheck).as("the test's interrupt put back").isTrue();
    }

    /**
     * An interrupt arriving while the check waits for other threads' closes (a timeout's, a cancelled run's) ends the
     * wait there, rather than after {@link ComputeMemoryExtension#SETTLE_TIMEOUT}, and the buffer is still reported.
     */
    @Test
    void anInterruptDuringTheChecksWaitEndsItAndTheBufferIsStillReported() {
        long started = System.nanoTime();
        Events events = run(InterruptedDuringTheCheck.class);
        Duration took = Duration.ofNanos(System.nanoTime() - started);

        events.assertStatistics(statistics -> statistics.started(1).failed(1));
        assertThat(events.failed().stream().findFirst().orElseThrow().getRequiredPayload(TestExecutionResult.class).getThrowable()
                .orElseThrow()).isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("the watched manager (cpu) has 1 buffer(s) of 64 bytes open");
        assertThat(InterruptedDuringTheCheck.interruptedInTheWait).as("the interrupt came while the check waited").isTrue();
        assertThat(InterruptedDuringTheCheck.interruptedAfterTheCheck).as("the interrupt put back").isTrue();
        assertThat(took).as("the wait ended at the interrupt").isLessThan(ComputeMemoryExtension.SETTLE_TIMEOUT);
    }

    /**
     * A budget or a recording a test left open passed: a reservation left held the pool's memory, and a recording left
     * running made the next test's startRecording fail, each away from the test that left it.
     */
    @Test
    void aTestThatLeavesABudgetOrARecordingOpenFailsNamingIt() {
        Events events = run(LeavesBudgetsAndARecordingOpen.class);
        events.assertStatistics(statistics -> statistics.started(4).succeeded(1).failed(3));
        assertThat(events.succeeded().stream().findFirst().orElseThrow().getTestDescriptor().getDisplayName())
                .isEqualTo("a_closesItsBudgetAndRecording()");
        assertThat(events.failed().stream().map(event -> event.getRequiredPayload(TestExecutionResult.class).getThrowable().orElseThrow()))
                .allSatisfy(failure -> assertThat(failure).isInstanceOf(AssertionError.class))
                .extracting(Throwable::getMessage).containsExactly(
                        "the watched manager has 1 budget(s) open that this test made and did not close: 'tenant'; close each one "
                                + "(try-with-resources) before the test ends",
                        "the watched manager has 1 budget(s) open that this test made and did not close: 'fixture/request'; close "
                                + "each one (try-with-resources) before the test ends",
                        "the watched manager is recording: this test started a recording and did not stop it; call stopRecording() "
                                + "before the test ends");
    }

    @Test
    void inASpringTestItWatchesTheContextsManagers() {
        assertThat(singleFailure(SpringTestLeavingABufferOpen.class)).isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("unifiedMemoryManager (cpu) has 1 buffer(s) of 100 bytes open")
                .hasMessageContaining("ComputeMemoryExtensionTests$SpringTestLeavingABufferOpen.keepsABuffer(");
    }

    @Test
    void itWatchesAManagerOfAParentContextThatChildContextsShare() {
        assertThat(singleFailure(SpringTestWithTheManagerInAParentContext.class)).isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("parentsManager (cpu) has 1 buffer(s) of 10 bytes open")
                .hasMessageContaining("ComputeMemoryExtensionTests$SpringTestWithTheManagerInAParentContext.keepsABuffer(");
    }

    @Test
    void aManagerUnderTwoBeanNamesIsCheckedOnceSoItsBuffersAreToldOnce() {
        assertThat(singleFailure(SpringTestWithAManagerUnderTwoNames.class)).isInstanceOf(AssertionError.class)
                .hasMessageContaining("(cpu) has 1 buffer(s) of 10 bytes open").hasMessageNotContaining("\n\n");
    }

    @Test
    void withoutAManagerToWatchItSaysHowToGiveItOne() {
        assertThat(singleFailure(NoManager.class)).isInstanceOf(ExtensionConfigurationException.class)
                .hasMessageContaining("has no Spring application context to find managers in")
                .hasMessageContaining("ComputeMemoryExtension.watching(() -> manager)");
        assertThat(singleFailure(SpringTestWithoutAManager.class)).isInstanceOf(ExtensionConfigurationException.class)
                .hasMessageContaining("has no UnifiedMemoryManager bean: a slice test (@WebMvcTest, ...) gets one with @AutoConfigureComputeMemory");
    }

    /** With the starter off, the failure sent the reader to @AutoConfigureComputeMemory, which the test had already. */
    @Test
    void withTheStarterOffItSaysSoRatherThanAskForTheAnnotationTheTestHas() {
        assertThat(singleFailure(SpringTestWithTheStarterOff.class)).isInstanceOf(ExtensionConfigurationException.class)
                .hasMessage("the application context of " + SpringTestWithTheStarterOff.class.getName() + " has no UnifiedMemoryManager "
                        + "bean: compute.enabled is false there, which turns the starter off and with it the test's manager; set "
                        + "compute.enabled=true in the test's properties to watch its memory");
    }

    /**
     * JUnit's parallel execution on: two tests of one manager, one dropping a buffer. Run at once, the garbage-collected
     * buffer failed the other test too; they take turns, so it fails its own test alone.
     */
    @Test
    void testsOnOneManagerTakeTurnsUnderParallelExecution() {
        Events events = EngineTestKit.engine("junit-jupiter").selectors(selectClass(TwoTestsOnOneManager.class))
                .configurationParameter("junit.jupiter.execution.parallel.enabled", "true")
                .configurationParameter("junit.jupiter.execution.parallel.mode.default", "concurrent")
                .configurationParameter("junit.jupiter.execution.parallel.config.strategy", "fixed")
                .configurationParameter("junit.jupiter.execution.parallel.config.fixed.parallelism", "2")
                .execute().testEvents();
        events.assertStatistics(statistics -> statistics.started(2).succeeded(1).failed(1));
        assertThat(events.failed().stream().findFirst().orElseThrow().getTestDescriptor().getDisplayName()).isEqualTo("dropsABuffer()");
        assertThat(TwoTestsOnOneManager.overlapped).as("one test ran inside the other").isFalse();
    }

    /**
     * A {@code @TestFactory}'s dynamic tests run within its method, which JUnit surrounds with the callbacks, not each
     * of them: a buffer one of them left open failed the factory, not the dynamic test that opened it. Each dynamic
     * test is checked as it ends now, and the factory only for what it left itself.
     */
    @Test
    void aDynamicTestThatLeavesABufferOpenFailsItselfNotItsFactory() {
        Events events = run(DynamicTestsOfAFactory.class);
        events.assertStatistics(statistics -> statistics.started(3).succeeded(2).failed(1));
        var failed = events.failed().stream().findFirst().orElseThrow();
        assertThat(failed.getTestDescriptor().getDisplayName()).isEqualTo("keeps");
        assertThat(failed.getRequiredPayload(TestExecutionResult.class).getThrowable().orElseThrow()).isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("the watched manager (cpu) has 1 buffer(s) of 4096 bytes open that this test opened");
        assertThat(EngineTestKit.engine("junit-jupiter").selectors(selectClass(DynamicTestsOfAFactory.class)).execute().containerEvents()
                .failed().count()).as("the factory").isZero();
    }

    private static Throwable singleFailure(Class<?> testClass) {
        List<Throwable> failures = run(testClass).failed().stream()
                .map(event -> event.getRequiredPayload(TestExecutionResult.class).getThrowable().orElseThrow()).toList();
        assertThat(failures).hasSize(1);
        return failures.getFirst();
    }

    private static Events run(Class<?> testClass) {
        return EngineTestKit.engine("junit-jupiter").selectors(selectClass(testClass)).execute().testEvents();
    }

    private static UnifiedMemoryManager paranoidCpuManager() {
        return UnifiedMemoryManager.builder().backend("cpu").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }

    static class LeavesABufferOpen {

        static UnifiedMemoryManager manager;
        static @Nullable UnifiedBuffer kept;

        @RegisterExtension
        ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeAll
        static void start() {
            manager = paranoidCpuManager();
        }

        @AfterAll
        static void stop() {
            kept.close();
            manager.close();
        }

        @Test
        void keepsABuffer() {
            allocateAndKeep();
        }

        private static void allocateAndKeep() {
            kept = manager.allocate(4096);
        }
    }

    static class DynamicTestsOfAFactory {

        static UnifiedMemoryManager manager;
        static final List<UnifiedBuffer> kept = new ArrayList<>();

        @RegisterExtension
        ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeAll
        static void start() {
            manager = paranoidCpuManager();
        }

        @AfterAll
        static void stop() {
            kept.forEach(UnifiedBuffer::close);
            kept.clear();
            manager.close();
        }

        @TestFactory
        Stream<DynamicTest> eachChecked() {
            return Stream.of(dynamicTest("closes", () -> manager.allocate(4096).close()),
                    dynamicTest("keeps", () -> kept.add(manager.allocate(4096))),
                    dynamicTest("closes too", () -> manager.allocate(1024).close()));
        }
    }

    @TestMethodOrder(MethodOrderer.MethodName.class)
    static class LeavesItsThreadInterrupted {

        static UnifiedMemoryManager manager;
        static @Nullable UnifiedBuffer kept;
        static volatile boolean interruptedAfterTheCheck;

        @RegisterExtension
        static ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeAll
        static void start() {
            manager = paranoidCpuManager();
        }

        @AfterEach
        void readTheInterrupt() {
            interruptedAfterTheCheck |= Thread.currentThread().isInterrupted();
        }

        @AfterAll
        static void stop() {
            kept.close();
            manager.close();
        }

        @Test
        void a_keepsABufferAndAnInterrupt() {
            kept = manager.allocate(64);
            Thread.currentThread().interrupt(); // as a test of cancellation may leave it
        }

        /** Starts on the thread that the test before left interrupted, unless JUnit took the interrupt off. */
        @Test
        void b_opensNothing() {}
    }

    static class InterruptedDuringTheCheck {

        static UnifiedMemoryManager manager;
        static @Nullable UnifiedBuffer kept;
        static volatile boolean interruptedInTheWait;
        static volatile boolean interruptedAfterTheCheck;

        @RegisterExtension
        static ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeAll
        static void start() {
            manager = paranoidCpuManager();
        }

        @AfterEach
        void readTheInterrupt() {
            interruptedAfterTheCheck = Thread.interrupted();
        }

        @AfterAll
        static void stop() {
            kept.close();
            manager.close();
        }

        @Test
        void keepsABufferAndIsInterruptedInTheCheck() {
            kept = manager.allocate(64);
            Thread tested = Thread.currentThread();
            Thread.ofPlatform().daemon().start(() -> {
                // the check's wait sleeps: the only timed wait on the test's thread once this method returned
                long deadline = System.nanoTime() + ComputeMemoryExtension.SETTLE_TIMEOUT.toNanos() / 2;
                while (tested.getState() != Thread.State.TIMED_WAITING && System.nanoTime() < deadline) {
                    LockSupport.parkNanos(1_000_000);
                }
                interruptedInTheWait = tested.getState() == Thread.State.TIMED_WAITING;
                tested.interrupt();
            });
        }
    }

    @TestMethodOrder(MethodOrderer.MethodName.class)
    static class LeavesBudgetsAndARecordingOpen {

        static UnifiedMemoryManager manager;
        MemoryBudget fixture;

        @RegisterExtension
        static ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeAll
        static void start() {
            manager = paranoidCpuManager();
        }

        @BeforeEach
        void makeTheFixture() {
            fixture = manager.budget("fixture", 1 << 20);
        }

        @AfterEach
        void closeTheFixture() {
            fixture.close();
        }

        @AfterAll
        static void stop() {
            manager.close();
        }

        @Test
        void a_closesItsBudgetAndRecording() {
            manager.startRecording(RecordingOptions.defaults());
            try (MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant", 1 << 20).withReservation(MemoryLocation.HOST, 1 << 20));
                    MemoryBudget request = fixture.child("request", 1024)) {
                request.allocate(8).close();
            }
            manager.stopRecording();
        }

        @Test
        void b_leavesABudgetReservingMemoryOpen() {
            manager.budget(BudgetSpec.of("tenant", 1 << 20).withReservation(MemoryLocation.HOST, 1 << 20));
        }

        @Test
        void c_leavesABudgetUnderTheFixtureOpen() {
            fixture.child("request", 1024);
        }

        @Test
        void d_leavesARecordingRunning() {
            manager.startRecording(RecordingOptions.defaults());
        }
    }

    static class ClosesWhatItOpens {

        UnifiedMemoryManager manager;
        UnifiedBuffer fixture;

        @RegisterExtension
        ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeEach
        void start() {
            manager = paranoidCpuManager();
            fixture = manager.allocate(1024);
        }

        @AfterEach
        void stop() {
            fixture.close();
            manager.close();
        }

        @Test
        void closesItsBuffer() {
            try (UnifiedBuffer buffer = manager.allocate(4096)) {
                buffer.copyFrom(new byte[4096]);
            }
        }

        @Test
        void usesOnlyTheFixture() {
            fixture.copyFrom(new byte[1024]);
        }
    }

    static class DropsABuffer {

        static UnifiedMemoryManager manager;

        @RegisterExtension
        static ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeAll
        static void start() {
            manager = paranoidCpuManager();
        }

        @AfterAll
        static void stop() {
            manager.close();
        }

        @Test
        void dropsABuffer() {
            manager.allocate(4096);
            // a collection and the Cleaner's thread, neither bound in time on a loaded machine
            await().atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(10)).until(() -> {
                System.gc();
                return manager.leaksDetected() > 0;
            });
        }
    }

    /** {@link DropsABuffer}'s test, and one beside it on the same manager. */
    static class TwoTestsOnOneManager extends DropsABuffer {

        static final AtomicInteger running = new AtomicInteger();
        static volatile boolean overlapped;

        @BeforeEach
        void enter() {
            overlapped |= running.incrementAndGet() > 1;
        }

        @AfterEach
        void leave() {
            running.decrementAndGet();
        }

        @Test
        void staysQuiet() throws InterruptedException {
            // run at once with the other test, it sees that test's buffer found garbage-collected
            long until = System.nanoTime() + Duration.ofSeconds(2).toNanos();
            while (manager.leaksDetected() == 0 && System.nanoTime() < until) {
                Thread.sleep(10);
            }
        }
    }

    @TestMethodOrder(MethodOrderer.MethodName.class)
    static class FailsMidwayThenAnotherRuns {

        static UnifiedMemoryManager manager;

        @RegisterExtension
        static ComputeMemoryExtension memory = ComputeMemoryExtension.watching(() -> manager);

        @BeforeAll
        static void start() {
            manager = paranoidCpuManager();
        }

        @AfterAll
        static void stop() {
            manager.close();
        }

        @Test
        void a_failsBeforeClosingItsBuffer() {
            UnifiedBuffer buffer = manager.allocate(4096);
            buffer.copyFrom(new byte[4096]);
            throw new IllegalStateException("midway");
        }

        /** Opens nothing; the garbage collector finds the buffer the test before dropped. */
        @Test
        void b_opensNothing() {
            await().atMost(Duration.ofSeconds(3)).pollInterval(Duration.ofMillis(10)).until(() -> {
                System.gc();
                return manager.leaksDetected() > 0;
            });
        }
    }

    @SpringBootTest(classes = NoAutoConfiguration.class)
    @AutoConfigureComputeMemory
    @ExtendWith(ComputeMemoryExtension.class)
    @DirtiesContext // its manager closes with the class, freeing the buffer left open
    static class SpringTestLeavingABufferOpen {

        @Autowired
        UnifiedMemoryManager manager;

        /** Reachable, so that the check finds it open rather than the leak detector finding it dropped. */
        static @Nullable UnifiedBuffer kept;

        @Test
        void keepsABuffer() {
            kept = manager.allocate(100);
        }
    }

    @ExtendWith({SpringExtension.class, ComputeMemoryExtension.class})
    @ContextHierarchy({@ContextConfiguration(classes = ParentWithAManager.class), @ContextConfiguration(classes = NoAutoConfiguration.class)})
    @DirtiesContext // the parent's manager closes with the class, freeing the buffer left open
    static class SpringTestWithTheManagerInAParentContext {

        @Autowired
        UnifiedMemoryManager manager;

        static @Nullable UnifiedBuffer kept;

        @Test
        void keepsABuffer() {
            kept = manager.allocate(10);
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class ParentWithAManager {

        @Bean(destroyMethod = "close")
        UnifiedMemoryManager parentsManager() {
            return paranoidCpuManager();
        }
    }

    @SpringBootTest(classes = TheManagerUnderAnotherName.class)
    @AutoConfigureComputeMemory(replace = Replace.AUTO_CONFIGURED)
    @ExtendWith(ComputeMemoryExtension.class)
    @DirtiesContext
    static class SpringTestWithAManagerUnderTwoNames {

        @Autowired
        UnifiedMemoryManager manager;

        static @Nullable UnifiedBuffer kept;

        @Test
        void keepsABuffer() {
            kept = manager.allocate(10);
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class TheManagerUnderAnotherName {

        /** The starter's manager again, as an application hands one manager to code that asks for it by another name. */
        @Bean(autowireCandidate = false)
        UnifiedMemoryManager sameManager(UnifiedMemoryManager manager) {
            return manager;
        }
    }

    @SpringBootTest(classes = NoAutoConfiguration.class)
    @ExtendWith(ComputeMemoryExtension.class)
    static class SpringTestWithoutAManager {

        @Test
        void runs() {}
    }

    @SpringBootTest(classes = NoAutoConfiguration.class, properties = "compute.enabled=false")
    @AutoConfigureComputeMemory
    @ExtendWith(ComputeMemoryExtension.class)
    static class SpringTestWithTheStarterOff {

        @Test
        void runs() {}
    }

    @ExtendWith(ComputeMemoryExtension.class)
    static class NoManager {

        @Test
        void runs() {}
    }

    @Configuration(proxyBeanMethods = false)
    static class NoAutoConfiguration {}
}
