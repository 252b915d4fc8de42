package dev.compute.memory.cuda;

import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelCompileException;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.ViewScope;
import dev.compute.memory.contract.KernelContractTest;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.PartialUnmapException;
import dev.compute.memory.spi.VirtualMemory;
import dev.compute.memory.testing.Breakpoint;
import dev.compute.memory.testing.ChildJvm;
import dev.compute.memory.testing.LogCapture;
import java.io.File;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUfunction;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A whole {@link CudaBackend}, JCuda included, on the stand-in driver ({@code src/test/c/fake-libcuda.c} built as
 * {@code libcuda.so.1}): what the backend does with the context, streams and events for device handles,
 * {@link CudaBackend#awaitIdle} and {@link CudaBackend#close()}, checked without a GPU. The fake makes events wait
 * or fail on demand, needs the context current where the driver does, and unmaps host memory when the last
 * reference to the primary context goes, as the real driver's reset does.
 *
 * <p>Each test runs its scenario (the method of the same name in {@link Scenarios}) in a JVM of its own, with the fake first on
 * {@code LD_LIBRARY_PATH}: loaded into this JVM under the driver's name, the fake would answer every other test's
 * probe for a real driver. Skips where there is no C compiler, or where the tests are not on {@code java.class.path}.
 */
class CudaBackendOnFakeDriverTest {

    @TempDir
    static Path dir;

    @BeforeAll
    static void build() throws IOException, InterruptedException, URISyntaxException {
        Path testClasses = Path.of(CudaBackendOnFakeDriverTest.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        assumeTrue(Arrays.stream(System.getProperty("java.class.path").split(File.pathSeparator)).map(Path::of).anyMatch(testClasses::equals),
                "the tests are not on java.class.path (a launcher with a class loader of its own), which the scenario's JVM is given");
        FakeDriverLibrary.compile(dir, DriverLibrary.LIBRARY);
    }

    /** Runs the scenario {@code name} in a JVM of its own on the fake driver; fails with its output if it fails. */
    private static void inFakeDriverJvm(String name) throws IOException, InterruptedException {
        inFakeDriverJvm(name, List.of());
    }

    /** As {@link #inFakeDriverJvm(String)}, the JVM started with {@code options} too. */
    private static void inFakeDriverJvm(String name, List<String> options) throws IOException, InterruptedException {
        Path output = dir.resolve(name + ".out");
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Xmx256m"));
        command.addAll(options);
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), CudaBackendOnFakeDriverTest.class.getName(), name));
        ProcessBuilder java = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(output.toFile());
        java.environment().put("LD_LIBRARY_PATH", dir.toString());
        Process process = java.start();
        boolean exited = process.waitFor(120, TimeUnit.SECONDS);
        if (!exited) {
            process.destroyForcibly().waitFor();
        }
        String printed = Files.readString(output);
        assertThat(exited).as("scenario %s ended within 2 minutes; it printed:%n%s", name, printed).isTrue();
        assertThat(process.exitValue()).as("scenario %s exit status; it printed:%n%s", name, printed).isZero();
    }

    // ---- the tests: each runs the scenario of its name ---------------------------------------------------------------

    /**
     * JCuda's exception mode ({@code JCudaDriver.setExceptionsEnabled(true)}, the first line of most JCuda samples, one
     * switch for the whole JVM) changes nothing the backend does: scenarios that meet {@code CUDA_ERROR_NOT_READY}
     * (copies behind stuck work, idle waits), a free the driver refuses and kernels launched and refused, run again
     * with it on. Before {@link DriverCalls}, JCuda's exception escaped the first busy query.
     */
    @ParameterizedTest
    @ValueSource(strings = {"aBlockingCopyBehindStuckWorkIsBounded", "aStagedCopyLongerThanTheDeviceWaitIsBoundedPerWaitNotInAll",
            "awaitIdleWaitsForEveryStreamWithinItsBound", "memoryWhoseFreeFailedStaysCountedAsLive",
            "ownKernelsLoadLaunchAndUnloadThroughJCuda", "aLaunchWithAWrongArgumentIsRefusedBeforeAnythingRunsOrChanges",
            "withPinningOffAnyCopyBehindStuckWorkIsBounded"})
    void withJCudasExceptionsOnTheScenarioEndsAlike(String scenario) throws Exception {
        inFakeDriverJvm(scenario, List.of("-D" + JCUDA_EXCEPTIONS + "=true"));
    }

    @Test
    void aHandleIsTheAccessBytesOnTheOpeningThreadsStream() throws Exception {
        inFakeDriverJvm("aHandleIsTheAccessBytesOnTheOpeningThreadsStream");
    }

    @Test
    void endWaitsForTheHandlesStreamAndForRecordedWork() throws Exception {
        inFakeDriverJvm("endWaitsForTheHandlesStreamAndForRecordedWork");
    }

    @Test
    void awaitIdleWaitsForEveryStreamWithinItsBound() throws Exception {
        inFakeDriverJvm("awaitIdleWaitsForEveryStreamWithinItsBound");
    }

    @Test
    void closeKeepsTheContextWhilePinnedOrManagedMemoryIsLive() throws Exception {
        inFakeDriverJvm("closeKeepsTheContextWhilePinnedOrManagedMemoryIsLive");
    }

    @Test
    void aViewHeldPastTheManagersCloseStaysMapped() throws Exception {
        inFakeDriverJvm("aViewHeldPastTheManagersCloseStaysMapped");
    }

    @Test
    void aDeviceAccessHeldPastTheManagersCloseKeepsItsStreamAndMemory() throws Exception {
        inFakeDriverJvm("aDeviceAccessHeldPastTheManagersCloseKeepsItsStreamAndMemory");
    }

    @Test
    void theManagersCloseOnAThreadHoldingADeviceAccessReleasesEverything() throws Exception {
        inFakeDriverJvm("theManagersCloseOnAThreadHoldingADeviceAccessReleasesEverything");
    }

    @Test
    void closeWaitsForANativeStreamBeingMade() throws Exception {
        inFakeDriverJvm("closeWaitsForANativeStreamBeingMade", ChildJvm.debuggable());
    }

    @Test
    void closeWaitsForAVirtualMemoryMapUnderWay() throws Exception {
        inFakeDriverJvm("closeWaitsForAVirtualMemoryMapUnderWay", ChildJvm.debuggable());
    }

    @Test
    void closeWaitsForAnAllocationUnderWay() throws Exception {
        inFakeDriverJvm("closeWaitsForAnAllocationUnderWay", ChildJvm.debuggable());
    }

    @Test
    void closeWaitsForAFreeUnderWayBeforeItReleasesTheContext() throws Exception {
        inFakeDriverJvm("closeWaitsForAFreeUnderWayBeforeItReleasesTheContext", ChildJvm.debuggable());
    }

    @Test
    void closeOnAHungDeviceIsBoundedAndKeepsWhatTheWorkUses() throws Exception {
        inFakeDriverJvm("closeOnAHungDeviceIsBoundedAndKeepsWhatTheWorkUses");
    }

    @Test
    void aCloseOnAnInterruptedThreadStillReleasesEverything() throws Exception {
        inFakeDriverJvm("aCloseOnAnInterruptedThreadStillReleasesEverything");
    }

    @Test
    void withPinningOffAnyCopyBehindStuckWorkIsBounded() throws Exception {
        inFakeDriverJvm("withPinningOffAnyCopyBehindStuckWorkIsBounded");
    }

    @Test
    void aBlockingCopyBehindStuckWorkIsBounded() throws Exception {
        inFakeDriverJvm("aBlockingCopyBehindStuckWorkIsBounded");
    }

    @Test
    void aCopyThatTimedOutOnceQueuedKeepsTheMemoryItUsesUntilTheDeviceIsPastIt() throws Exception {
        inFakeDriverJvm("aCopyThatTimedOutOnceQueuedKeepsTheMemoryItUsesUntilTheDeviceIsPastIt");
    }

    @Test
    void aCopyIntoAPinnedBuffersViewThatTimedOutOnceQueuedKeepsThatBuffersMemory() throws Exception {
        inFakeDriverJvm("aCopyIntoAPinnedBuffersViewThatTimedOutOnceQueuedKeepsThatBuffersMemory");
    }

    @Test
    void aCopyIntoAViewOfAnotherManagersBufferThatTimedOutOnceQueuedKeepsThatBuffersMemory() throws Exception {
        inFakeDriverJvm("aCopyIntoAViewOfAnotherManagersBufferThatTimedOutOnceQueuedKeepsThatBuffersMemory");
    }

    @Test
    void memoryWhoseFreeFailedStaysCountedAsLive() throws Exception {
        inFakeDriverJvm("memoryWhoseFreeFailedStaysCountedAsLive");
    }

    @Test
    void aCompactionWhoseCopyTimedOutOnceQueuedKeepsThePlaceItWrites() throws Exception {
        inFakeDriverJvm("aCompactionWhoseCopyTimedOutOnceQueuedKeepsThePlaceItWrites");
    }

    @Test
    void closeUnderACopyKeepsWhatTheCopyUses() throws Exception {
        inFakeDriverJvm("closeUnderACopyKeepsWhatTheCopyUses");
    }

    @Test
    void theManagersCloseWaitsForWorkRecordedOnOnesOwnStream() throws Exception {
        inFakeDriverJvm("theManagersCloseWaitsForWorkRecordedOnOnesOwnStream");
    }

    @Test
    void aStagedCopyLongerThanTheDeviceWaitIsBoundedPerWaitNotInAll() throws Exception {
        inFakeDriverJvm("aStagedCopyLongerThanTheDeviceWaitIsBoundedPerWaitNotInAll");
    }

    @Test
    void virtualThreadsGoOnWithTheContextCurrentAfterAWait() throws Exception {
        inFakeDriverJvm("virtualThreadsGoOnWithTheContextCurrentAfterAWait");
    }

    @Test
    void ownKernelsLoadLaunchAndUnloadThroughJCuda() throws Exception {
        inFakeDriverJvm("ownKernelsLoadLaunchAndUnloadThroughJCuda");
    }

    @Test
    void aKernelsBufferClosedRightAfterTheLaunchWaitsForTheKernel() throws Exception {
        inFakeDriverJvm("aKernelsBufferClosedRightAfterTheLaunchWaitsForTheKernel");
    }

    @Test
    void aLaunchWithAWrongArgumentIsRefusedBeforeAnythingRunsOrChanges() throws Exception {
        inFakeDriverJvm("aLaunchWithAWrongArgumentIsRefusedBeforeAnythingRunsOrChanges");
    }

    @Test
    void aKernelWhosePtxRequiresABlockGetsItAndAnyOtherIsRefusedBeforeAnythingRuns() throws Exception {
        inFakeDriverJvm("aKernelWhosePtxRequiresABlockGetsItAndAnyOtherIsRefusedBeforeAnythingRuns");
    }

    @Test
    void aLaunchWithAClosedOrHostBufferIsRefusedBeforeAnythingRunsOrChanges() throws Exception {
        inFakeDriverJvm("aLaunchWithAClosedOrHostBufferIsRefusedBeforeAnythingRunsOrChanges");
    }

    @Test
    void manyThreadsLaunchOneKernelAndLaunchesRacingTheCloseRunOrAreRefused() throws Exception {
        inFakeDriverJvm("manyThreadsLaunchOneKernelAndLaunchesRacingTheCloseRunOrAreRefused");
    }

    @Test
    void aCloseMadeByAnActionOfADeviceFutureDoesNotWaitForThatAction() throws Exception {
        inFakeDriverJvm("aCloseMadeByAnActionOfADeviceFutureDoesNotWaitForThatAction");
    }

    @Test
    void aCloseMadeByAnActionWaitsForNoWorkOfItsOwnBatch() throws Exception {
        inFakeDriverJvm("aCloseMadeByAnActionWaitsForNoWorkOfItsOwnBatch");
    }

    @Test
    void aHostReadMadeByAnActionGetsWhatLaterWorkOfItsOwnBatchWrote() throws Exception {
        inFakeDriverJvm("aHostReadMadeByAnActionGetsWhatLaterWorkOfItsOwnBatchWrote");
    }

    @Test
    void anActionWaitingForALaterFutureOfItsOwnBatchGetsIt() throws Exception {
        inFakeDriverJvm("anActionWaitingForALaterFutureOfItsOwnBatchGetsIt");
    }

    @Test
    void anAllocationMadeByAnActionGetsMemoryFreedByLaterWorkOfItsOwnBatch() throws Exception {
        inFakeDriverJvm("anAllocationMadeByAnActionGetsMemoryFreedByLaterWorkOfItsOwnBatch");
    }

    @Test
    void anActionBlockedWithoutTheLibraryHoldsUpNoLaterFutureOfItsBatch() throws Exception {
        inFakeDriverJvm("anActionBlockedWithoutTheLibraryHoldsUpNoLaterFutureOfItsBatch");
    }

    @Test
    void theManagersCloseUnderAnActionThatNeverEndsIsBoundedAndSaysSo() throws Exception {
        inFakeDriverJvm("theManagersCloseUnderAnActionThatNeverEndsIsBoundedAndSaysSo");
    }

    @Test
    void anOverlappingCopyWithinOneAllocationMovesTheBytesAsMemmoveDoes() throws Exception {
        inFakeDriverJvm("anOverlappingCopyWithinOneAllocationMovesTheBytesAsMemmoveDoes");
    }

    @Test
    void anOptionBeyondItsBoundFailsAtStartNamingIt() throws Exception {
        inFakeDriverJvm("anOptionBeyondItsBoundFailsAtStartNamingIt");
    }

    @Test
    void aTrimStuckInTheDriverHoldsUpNoAllocationNorFigureRead() throws Exception {
        inFakeDriverJvm("aTrimStuckInTheDriverHoldsUpNoAllocationNorFigureRead");
    }

    @Test
    void theManagersCloseWaitsForATrimInTheDriverAndFreesNothingTwice() throws Exception {
        inFakeDriverJvm("theManagersCloseWaitsForATrimInTheDriverAndFreesNothingTwice");
    }

    @Test
    void anAllocationNeedingWhatATrimInTheDriverGivesBackWaitsForItRatherThanFail() throws Exception {
        inFakeDriverJvm("anAllocationNeedingWhatATrimInTheDriverGivesBackWaitsForItRatherThanFail");
    }

    @Test
    void theManagersCloseUnderATrimThatStaysInTheDriverIsBounded() throws Exception {
        inFakeDriverJvm("theManagersCloseUnderATrimThatStaysInTheDriverIsBounded");
    }

    @Test
    void aTrimWhoseUnmapTheDriverRefusesLeavesThePoolAndFiguresAsTheyWere() throws Exception {
        inFakeDriverJvm("aTrimWhoseUnmapTheDriverRefusesLeavesThePoolAndFiguresAsTheyWere");
    }

    @Test
    void aTrimWhoseUnmapLeavesAPageUnmappedBooksItSoAndMapsItBeforeReuse() throws Exception {
        inFakeDriverJvm("aTrimWhoseUnmapLeavesAPageUnmappedBooksItSoAndMapsItBeforeReuse");
    }

    @Test
    void aChainOfAccessesAndOpsCostsTheCallingThreadItsLaunchesAndTheWaiterAMarkerPerWakeUp() throws Exception {
        inFakeDriverJvm("aChainOfAccessesAndOpsCostsTheCallingThreadItsLaunchesAndTheWaiterAMarkerPerWakeUp");
    }

    @Test
    void aChainsEndIsWaitedForByWorkOnAnotherStreamOnTheDeviceAndByAHostRead() throws Exception {
        inFakeDriverJvm("aChainsEndIsWaitedForByWorkOnAnotherStreamOnTheDeviceAndByAHostRead");
    }

    @Test
    void unifiedMemoryIsNotOfferedWhereTheHostMayNotTouchItWhileAKernelRuns() throws Exception {
        inFakeDriverJvm("unifiedMemoryIsNotOfferedWhereTheHostMayNotTouchItWhileAKernelRuns");
    }

    @Test
    void stagedCopiesAreByteExactAtEveryChunkBoundaryBehindASlowDevice() throws Exception {
        inFakeDriverJvm("stagedCopiesAreByteExactAtEveryChunkBoundaryBehindASlowDevice");
    }

    @Test
    void aGpuBeforeVoltaIsPassedOverWithItsReasonRatherThanFailingAtStart() throws Exception {
        inFakeDriverJvm("aGpuBeforeVoltaIsPassedOverWithItsReasonRatherThanFailingAtStart");
    }

    @Test
    void everyPositionCompletesWithThreadsSharingTheStreams() throws Exception {
        inFakeDriverJvm("everyPositionCompletesWithThreadsSharingTheStreams");
    }

    @Test
    void anOpKernelMissingAtStartLeavesNoModuleLoaded() throws Exception {
        inFakeDriverJvm("anOpKernelMissingAtStartLeavesNoModuleLoaded");
    }

    @Test
    void copiesFromAndToJavaMemoryAreStillDoneWherePinnedMemoryForStagingIsShort() throws Exception {
        inFakeDriverJvm("copiesFromAndToJavaMemoryAreStillDoneWherePinnedMemoryForStagingIsShort");
    }

    @Test
    void aContextLostUnderThreadsAllocatingCopyingAndClosingFailsEachClearlyAndTheCloseEnds() throws Exception {
        inFakeDriverJvm("aContextLostUnderThreadsAllocatingCopyingAndClosingFailsEachClearlyAndTheCloseEnds");
    }

    @Test
    void aStickyErrorSaysTheContextIsLostOnceAndFurtherWorkIsRefused() throws Exception {
        inFakeDriverJvm("aStickyErrorSaysTheContextIsLostOnceAndFurtherWorkIsRefused");
    }

    @Test
    void aDeviceItsComputeModeKeepsFromThisProcessIsPassedOverWithItsReason() throws Exception {
        inFakeDriverJvm("aDeviceItsComputeModeKeepsFromThisProcessIsPassedOverWithItsReason");
    }

    @Test
    void aStartThatCannotMakeTheContextCurrentReleasesItsReference() throws Exception {
        inFakeDriverJvm("aStartThatCannotMakeTheContextCurrentReleasesItsReference");
    }

    /** The JVM's own native allocations (Unsafe's, an arena's) capped at 3 MiB, so that a lane's second 2 MiB slot cannot be had. */
    @Test
    void aStagingLaneWhosePageableSlotCannotBeHadFreesWhatItMade() throws Exception {
        inFakeDriverJvm("aStagingLaneWhosePageableSlotCannotBeHadFreesWhatItMade",
                List.of("-XX:+UnlockDiagnosticVMOptions", "-XX:NativeMemoryTracking=summary", "-XX:MallocLimit=other:3m:oom"));
    }

    @Test
    void aFailedStartThrowsItsOwnFailureWhateverItsCleanupMeets() throws Exception {
        inFakeDriverJvm("aFailedStartThrowsItsOwnFailureWhateverItsCleanupMeets");
    }

    // ---- in the scenario's JVM -------------------------------------------------------------------------------------

    /** The system property that turns JCuda's exception mode on in a scenario's JVM before the scenario runs. */
    private static final String JCUDA_EXCEPTIONS = "compute.test.jcuda-exceptions";

    public static void main(String[] args) {
        try {
            if (Boolean.getBoolean(JCUDA_EXCEPTIONS)) {
                jcuda.driver.JCudaDriver.setExceptionsEnabled(true);
            }
            switch (args[0]) {
                case "aHandleIsTheAccessBytesOnTheOpeningThreadsStream" -> Scenarios.aHandleIsTheAccessBytesOnTheOpeningThreadsStream();
                case "aKernelWhosePtxRequiresABlockGetsItAndAnyOtherIsRefusedBeforeAnythingRuns" ->
                        Scenarios.aKernelWhosePtxRequiresABlockGetsItAndAnyOtherIsRefusedBeforeAnythingRuns();
                case "endWaitsForTheHandlesStreamAndForRecordedWork" -> Scenarios.endWaitsForTheHandlesStreamAndForRecordedWork();
                case "awaitIdleWaitsForEveryStreamWithinItsBound" -> Scenarios.awaitIdleWaitsForEveryStreamWithinItsBound();
                case "aCloseOnAnInterruptedThreadStillReleasesEverything" -> Scenarios.aCloseOnAnInterruptedThreadStillReleasesEverything();
                case "closeKeepsTheContextWhilePinnedOrManagedMemoryIsLive" -> Scenarios.closeKeepsTheContextWhilePinnedOrManagedMemoryIsLive();
                case "aViewHeldPastTheManagersCloseStaysMapped" -> Scenarios.aViewHeldPastTheManagersCloseStaysMapped();
                case "closeWaitsForAnAllocationUnderWay" -> Scenarios.closeWaitsForAnAllocationUnderWay();
                case "closeWaitsForAFreeUnderWayBeforeItReleasesTheContext" -> Scenarios.closeWaitsForAFreeUnderWayBeforeItReleasesTheContext();
                case "closeWaitsForAVirtualMemoryMapUnderWay" -> Scenarios.closeWaitsForAVirtualMemoryMapUnderWay();
                case "closeWaitsForANativeStreamBeingMade" -> Scenarios.closeWaitsForANativeStreamBeingMade();
                case "theManagersCloseOnAThreadHoldingADeviceAccessReleasesEverything" ->
                        Scenarios.theManagersCloseOnAThreadHoldingADeviceAccessReleasesEverything();
                case "aDeviceAccessHeldPastTheManagersCloseKeepsItsStreamAndMemory" ->
                        Scenarios.aDeviceAccessHeldPastTheManagersCloseKeepsItsStreamAndMemory();
                case "closeOnAHungDeviceIsBoundedAndKeepsWhatTheWorkUses" -> Scenarios.closeOnAHungDeviceIsBoundedAndKeepsWhatTheWorkUses();
                case "ownKernelsLoadLaunchAndUnloadThroughJCuda" -> Scenarios.ownKernelsLoadLaunchAndUnloadThroughJCuda();
                case "aBlockingCopyBehindStuckWorkIsBounded" -> Scenarios.aBlockingCopyBehindStuckWorkIsBounded();
                case "withPinningOffAnyCopyBehindStuckWorkIsBounded" -> Scenarios.withPinningOffAnyCopyBehindStuckWorkIsBounded();
                case "closeUnderACopyKeepsWhatTheCopyUses" -> Scenarios.closeUnderACopyKeepsWhatTheCopyUses();
                case "aCopyIntoAPinnedBuffersViewThatTimedOutOnceQueuedKeepsThatBuffersMemory" ->
                        Scenarios.aCopyIntoAPinnedBuffersViewThatTimedOutOnceQueuedKeepsThatBuffersMemory();
                case "aCopyIntoAViewOfAnotherManagersBufferThatTimedOutOnceQueuedKeepsThatBuffersMemory" ->
                        Scenarios.aCopyIntoAViewOfAnotherManagersBufferThatTimedOutOnceQueuedKeepsThatBuffersMemory();
                case "memoryWhoseFreeFailedStaysCountedAsLive" -> Scenarios.memoryWhoseFreeFailedStaysCountedAsLive();
                case "aCompactionWhoseCopyTimedOutOnceQueuedKeepsThePlaceItWrites" ->
                        Scenarios.aCompactionWhoseCopyTimedOutOnceQueuedKeepsThePlaceItWrites();
                case "aCopyThatTimedOutOnceQueuedKeepsTheMemoryItUsesUntilTheDeviceIsPastIt" ->
                        Scenarios.aCopyThatTimedOutOnceQueuedKeepsTheMemoryItUsesUntilTheDeviceIsPastIt();
                case "aKernelsBufferClosedRightAfterTheLaunchWaitsForTheKernel" -> Scenarios.aKernelsBufferClosedRightAfterTheLaunchWaitsForTheKernel();
                case "theManagersCloseWaitsForWorkRecordedOnOnesOwnStream" -> Scenarios.theManagersCloseWaitsForWorkRecordedOnOnesOwnStream();
                case "aStagedCopyLongerThanTheDeviceWaitIsBoundedPerWaitNotInAll" -> Scenarios.aStagedCopyLongerThanTheDeviceWaitIsBoundedPerWaitNotInAll();
                case "virtualThreadsGoOnWithTheContextCurrentAfterAWait" -> Scenarios.virtualThreadsGoOnWithTheContextCurrentAfterAWait();
                case "aLaunchWithAWrongArgumentIsRefusedBeforeAnythingRunsOrChanges" ->
                        Scenarios.aLaunchWithAWrongArgumentIsRefusedBeforeAnythingRunsOrChanges();
                case "aLaunchWithAClosedOrHostBufferIsRefusedBeforeAnythingRunsOrChanges" ->
                        Scenarios.aLaunchWithAClosedOrHostBufferIsRefusedBeforeAnythingRunsOrChanges();
                case "manyThreadsLaunchOneKernelAndLaunchesRacingTheCloseRunOrAreRefused" ->
                        Scenarios.manyThreadsLaunchOneKernelAndLaunchesRacingTheCloseRunOrAreRefused();
                case "aCloseMadeByAnActionOfADeviceFutureDoesNotWaitForThatAction" ->
                        Scenarios.aCloseMadeByAnActionOfADeviceFutureDoesNotWaitForThatAction();
                case "aCloseMadeByAnActionWaitsForNoWorkOfItsOwnBatch" -> Scenarios.aCloseMadeByAnActionWaitsForNoWorkOfItsOwnBatch();
                case "aHostReadMadeByAnActionGetsWhatLaterWorkOfItsOwnBatchWrote" ->
                        Scenarios.aHostReadMadeByAnActionGetsWhatLaterWorkOfItsOwnBatchWrote();
                case "anActionWaitingForALaterFutureOfItsOwnBatchGetsIt" -> Scenarios.anActionWaitingForALaterFutureOfItsOwnBatchGetsIt();
                case "anAllocationMadeByAnActionGetsMemoryFreedByLaterWorkOfItsOwnBatch" ->
                        Scenarios.anAllocationMadeByAnActionGetsMemoryFreedByLaterWorkOfItsOwnBatch();
                case "anActionBlockedWithoutTheLibraryHoldsUpNoLaterFutureOfItsBatch" ->
                        Scenarios.anActionBlockedWithoutTheLibraryHoldsUpNoLaterFutureOfItsBatch();
                case "theManagersCloseUnderAnActionThatNeverEndsIsBoundedAndSaysSo" ->
                        Scenarios.theManagersCloseUnderAnActionThatNeverEndsIsBoundedAndSaysSo();
                case "anOverlappingCopyWithinOneAllocationMovesTheBytesAsMemmoveDoes" ->
                        Scenarios.anOverlappingCopyWithinOneAllocationMovesTheBytesAsMemmoveDoes();
                case "anOptionBeyondItsBoundFailsAtStartNamingIt" -> Scenarios.anOptionBeyondItsBoundFailsAtStartNamingIt();
                case "aTrimStuckInTheDriverHoldsUpNoAllocationNorFigureRead" -> Scenarios.aTrimStuckInTheDriverHoldsUpNoAllocationNorFigureRead();
                case "theManagersCloseWaitsForATrimInTheDriverAndFreesNothingTwice" ->
                        Scenarios.theManagersCloseWaitsForATrimInTheDriverAndFreesNothingTwice();
                case "anAllocationNeedingWhatATrimInTheDriverGivesBackWaitsForItRatherThanFail" ->
                        Scenarios.anAllocationNeedingWhatATrimInTheDriverGivesBackWaitsForItRatherThanFail();
                case "theManagersCloseUnderATrimThatStaysInTheDriverIsBounded" ->
                        Scenarios.theManagersCloseUnderATrimThatStaysInTheDriverIsBounded();
                case "aTrimWhoseUnmapTheDriverRefusesLeavesThePoolAndFiguresAsTheyWere" ->
                        Scenarios.aTrimWhoseUnmapTheDriverRefusesLeavesThePoolAndFiguresAsTheyWere();
                case "aTrimWhoseUnmapLeavesAPageUnmappedBooksItSoAndMapsItBeforeReuse" ->
                        Scenarios.aTrimWhoseUnmapLeavesAPageUnmappedBooksItSoAndMapsItBeforeReuse();
                case "aChainOfAccessesAndOpsCostsTheCallingThreadItsLaunchesAndTheWaiterAMarkerPerWakeUp" ->
                        Scenarios.aChainOfAccessesAndOpsCostsTheCallingThreadItsLaunchesAndTheWaiterAMarkerPerWakeUp();
                case "aChainsEndIsWaitedForByWorkOnAnotherStreamOnTheDeviceAndByAHostRead" ->
                        Scenarios.aChainsEndIsWaitedForByWorkOnAnotherStreamOnTheDeviceAndByAHostRead();
                case "everyPositionCompletesWithThreadsSharingTheStreams" -> Scenarios.everyPositionCompletesWithThreadsSharingTheStreams();
                case "aGpuBeforeVoltaIsPassedOverWithItsReasonRatherThanFailingAtStart" ->
                        Scenarios.aGpuBeforeVoltaIsPassedOverWithItsReasonRatherThanFailingAtStart();
                case "stagedCopiesAreByteExactAtEveryChunkBoundaryBehindASlowDevice" ->
                        Scenarios.stagedCopiesAreByteExactAtEveryChunkBoundaryBehindASlowDevice();
                case "unifiedMemoryIsNotOfferedWhereTheHostMayNotTouchItWhileAKernelRuns" ->
                        Scenarios.unifiedMemoryIsNotOfferedWhereTheHostMayNotTouchItWhileAKernelRuns();
                case "anOpKernelMissingAtStartLeavesNoModuleLoaded" -> Scenarios.anOpKernelMissingAtStartLeavesNoModuleLoaded();
                case "copiesFromAndToJavaMemoryAreStillDoneWherePinnedMemoryForStagingIsShort" ->
                        Scenarios.copiesFromAndToJavaMemoryAreStillDoneWherePinnedMemoryForStagingIsShort();
                case "aContextLostUnderThreadsAllocatingCopyingAndClosingFailsEachClearlyAndTheCloseEnds" ->
                        Scenarios.aContextLostUnderThreadsAllocatingCopyingAndClosingFailsEachClearlyAndTheCloseEnds();
                case "aStickyErrorSaysTheContextIsLostOnceAndFurtherWorkIsRefused" ->
                        Scenarios.aStickyErrorSaysTheContextIsLostOnceAndFurtherWorkIsRefused();
                case "aDeviceItsComputeModeKeepsFromThisProcessIsPassedOverWithItsReason" ->
                        Scenarios.aDeviceItsComputeModeKeepsFromThisProcessIsPassedOverWithItsReason();
                case "aStartThatCannotMakeTheContextCurrentReleasesItsReference" ->
                        Scenarios.aStartThatCannotMakeTheContextCurrentReleasesItsReference();
                case "aStagingLaneWhosePageableSlotCannotBeHadFreesWhatItMade" ->
                        Scenarios.aStagingLaneWhosePageableSlotCannotBeHadFreesWhatItMade();
                case "aFailedStartThrowsItsOwnFailureWhateverItsCleanupMeets" ->
                        Scenarios.aFailedStartThrowsItsOwnFailureWhateverItsCleanupMeets();
                default -> throw new IllegalArgumentException("no scenario " + args[0]);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    /** What the tests run in their own JVMs, on the fake driver (first on the library path there). */
    static final class Scenarios {
        private Scenarios() {}

        // loaded here, in the scenario's JVM only: the test's JVM has no libcuda.so.1, or the real one
        private static final SymbolLookup FAKE = SymbolLookup.libraryLookup(DriverLibrary.LIBRARY, Arena.global());
        private static final MethodHandle HOLD = stub("stub_hold", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle RELEASE = stub("stub_release", FunctionDescriptor.ofVoid());
        private static final MethodHandle VMM = stub("stub_vmm", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle COMPUTE_CAPABILITY = stub("stub_compute_capability",
                FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        private static final MethodHandle EXCLUSIVE_MANAGED_ACCESS = stub("stub_exclusive_managed_access",
                FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle FAILING_STREAMS = stub("stub_failing_streams", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle COUNTERS = stub("stub_backend_counters", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        private static final MethodHandle KERNEL_COUNTERS = stub("stub_kernel_counters", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        private static final MethodHandle FAIL_FREE = stub("stub_fail_free", FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG));
        private static final MethodHandle HELD_COPIES = stub("stub_held_copies", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        private static final MethodHandle BLOCK_FREES = stub("stub_block_frees", FunctionDescriptor.ofVoid());
        private static final MethodHandle UNBLOCK_FREES = stub("stub_unblock_frees", FunctionDescriptor.ofVoid());
        private static final MethodHandle BLOCKED_FREES = stub("stub_blocked_frees", FunctionDescriptor.of(ValueLayout.JAVA_INT));
        private static final MethodHandle FAIL_UNMAP = stub("stub_fail_unmap", FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG));
        private static final MethodHandle FAIL_MAP = stub("stub_fail_map", FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG));
        private static final MethodHandle PAGE_COUNTERS = stub("stub_counters", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        private static final MethodHandle COUNT_ON_THIS_THREAD = stub("stub_count_on_this_thread", FunctionDescriptor.ofVoid());
        private static final MethodHandle CALLS = stub("stub_calls", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        private static final MethodHandle FAIL_FUNCTION_LOOKUP = stub("stub_fail_function_lookup", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle FAIL_HOST_ALLOC = stub("stub_fail_host_alloc", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle LOSE_CONTEXT = stub("stub_lose_context", FunctionDescriptor.ofVoid());
        private static final MethodHandle FAIL_RELEASE = stub("stub_fail_release", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle FAIL_SET_CURRENT = stub("stub_fail_set_current", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT));
        private static final MethodHandle COMPUTE_MODE = stub("stub_compute_mode", FunctionDescriptor.ofVoid(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));

        private static MethodHandle stub(String name, FunctionDescriptor descriptor) {
            return Linker.nativeLinker().downcallHandle(FAKE.find(name).orElseThrow(
                    () -> new IllegalStateException(DriverLibrary.LIBRARY + " here is not the fake driver: it has no " + name)), descriptor);
        }

        /** What the fake counts, as it stands now. */
        private record Counters(long contextReferences, long resets, long streams, long events, long eventsRecorded,
                                long pinned, long managed, long device, long callsWithoutContext, long rejected) {}

        private static Counters counters() throws Throwable {
            try (Arena scratch = Arena.ofConfined()) {
                MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 10);
                COUNTERS.invokeExact(out);
                long[] c = out.toArray(ValueLayout.JAVA_LONG);
                return new Counters(c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8], c[9]);
            }
        }

        private static void hold() throws Throwable {
            HOLD.invokeExact(1);
        }

        private static void release() throws Throwable {
            RELEASE.invokeExact();
        }

        private static CudaBackend open() {
            return (CudaBackend) new CudaBackendProvider().create(new BackendSettings(0, true, 1 << 20, Map.of("streams", "2")));
        }

        /** The WARNING records the backend logs from now on. */
        private static List<LogRecord> backendWarnings() {
            List<LogRecord> warnings = new CopyOnWriteArrayList<>();
            Logger.getLogger(CudaBackend.class.getName()).addHandler(new Handler() {
                @Override
                public void publish(LogRecord record) {
                    if (record.getLevel() == Level.WARNING) {
                        warnings.add(record);
                    }
                }

                @Override
                public void flush() {}

                @Override
                public void close() {}
            });
            return warnings;
        }

        /** A started thread whose stream index differs from the calling thread's. */
        private static Thread onAnotherStream(CudaBackend backend, Runnable work) {
            for (int tries = 0; tries < 100; tries++) {
                Thread thread = Thread.ofPlatform().unstarted(work);
                if (backend.streams().index(thread) != backend.streams().index(Thread.currentThread())) {
                    thread.start();
                    return thread;
                }
            }
            throw new AssertionError("no thread id landed on another stream");
        }

        private static void assertCleanClose(CudaBackend backend) throws Throwable {
            backend.close();
            Counters after = counters();
            assertThat(after.contextReferences()).as("context references").isZero();
            assertThat(after.streams()).as("live streams").isZero();
            assertThat(after.events()).as("live events").isZero();
            assertThat(after.callsWithoutContext()).as("calls made without the context current").isZero();
            assertThat(after.rejected()).as("calls the fake rejected").isZero();
        }

        static void aHandleIsTheAccessBytesOnTheOpeningThreadsStream() throws Throwable {
            CudaBackend backend = open();
            for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
                NativeAllocation allocation = backend.allocate(location, 4096);
                CudaDeviceHandle handle = backend.openDeviceHandle(allocation, 256, 1024, AccessMode.READ_WRITE);
                assertThat(handle.address()).as("%s", location).isEqualTo(allocation.address() + 256);
                assertThat(((DevicePointer) handle.pointer()).address()).as("%s", location).isEqualTo(allocation.address() + 256);
                assertThat(handle.byteSize()).isEqualTo(1024);
                assertThat(handle.deviceOrdinal()).isZero();
                assertThat(handle.stream()).isSameAs(backend.enter());
                assertThat(handle.end()).succeedsWithin(Duration.ofSeconds(5));
                assertThatThrownBy(handle::pointer).isInstanceOf(IllegalStateException.class).hasMessageContaining("ended");
                assertThatThrownBy(handle::stream).isInstanceOf(IllegalStateException.class);
                assertThatThrownBy(handle::end).isInstanceOf(IllegalStateException.class);
                backend.free(allocation);
            }

            // another thread, with no context current yet, gets its own stream, and its end records there
            NativeAllocation device = backend.allocate(MemoryLocation.DEVICE, 4096);
            CUstream mine = backend.enter();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            onAnotherStream(backend, () -> {
                try {
                    CudaDeviceHandle handle = backend.openDeviceHandle(device, 0, 4096, AccessMode.WRITE);
                    assertThat(handle.stream()).isSameAs(backend.enter()).isNotSameAs(mine);
                    assertThat(handle.end()).succeedsWithin(Duration.ofSeconds(5));
                } catch (Throwable t) {
                    failure.set(t);
                }
            }).join();
            assertThat(failure.get()).isNull();

            NativeAllocation host = backend.allocate(MemoryLocation.HOST, 4096);
            assertThatThrownBy(() -> backend.openDeviceHandle(host, 0, 4096, AccessMode.READ))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("HOST memory")
                    .hasMessageContaining("DEVICE, PINNED or UNIFIED")
                    .hasMessageContaining("host access");
            assertThatThrownBy(() -> backend.openDeviceHandle(device, 4000, 100, AccessMode.READ)).isInstanceOf(IndexOutOfBoundsException.class);
            backend.free(host);
            backend.free(device);
            assertCleanClose(backend);
        }

        static void endWaitsForTheHandlesStreamAndForRecordedWork() throws Throwable {
            CudaBackend backend = open();
            NativeAllocation device = backend.allocate(MemoryLocation.DEVICE, 4096);

            CudaDeviceHandle held = backend.openDeviceHandle(device, 0, 4096, AccessMode.WRITE);
            hold();
            CompletableFuture<Void> queued = held.end();
            assertThatThrownBy(() -> queued.get(200, TimeUnit.MILLISECONDS)).as("the end's event is held on the device")
                    .isInstanceOf(TimeoutException.class);
            release();
            assertThat(queued).succeedsWithin(Duration.ofSeconds(5));

            // work on a stream of one's own that fails on the device: the end reports it only if it joined that work
            FAILING_STREAMS.invokeExact(1);
            CUstream own = new CUstream();
            CudaResults.check(cuStreamCreate(own, 0), "cuStreamCreate");
            FAILING_STREAMS.invokeExact(0);
            CudaDeviceHandle alone = backend.openDeviceHandle(device, 0, 4096, AccessMode.WRITE);
            assertThat(alone.end()).as("without recordWork").succeedsWithin(Duration.ofSeconds(5));
            CudaDeviceHandle joined = backend.openDeviceHandle(device, 0, 4096, AccessMode.WRITE);
            joined.recordWork(own);
            assertThat(joined.end()).as("with recordWork").failsWithin(Duration.ofSeconds(5))
                    .withThrowableOfType(ExecutionException.class).withMessageContaining("CUDA_ERROR_ILLEGAL_ADDRESS");
            assertThatThrownBy(() -> joined.recordWork(own)).isInstanceOf(IllegalStateException.class);
            CudaResults.check(cuStreamDestroy(own), "cuStreamDestroy");

            backend.free(device);
            assertCleanClose(backend);
        }

        static void awaitIdleWaitsForEveryStreamWithinItsBound() throws Throwable {
            CudaBackend backend = open();
            assertThat(backend.awaitIdle(Duration.ZERO)).as("no stream yet, nothing queued").isTrue();
            backend.enter();
            onAnotherStream(backend, backend::enter).join(); // the "streams" option is 2: both exist now

            long recorded = counters().eventsRecorded();
            assertThat(backend.awaitIdle(Duration.ofSeconds(5))).isTrue();
            assertThat(counters().eventsRecorded() - recorded).as("one event per stream").isEqualTo(2);

            hold();
            long start = System.nanoTime();
            assertThat(backend.awaitIdle(Duration.ofMillis(200))).as("events held on the device").isFalse();
            long waitedMillis = (System.nanoTime() - start) / 1_000_000;
            assertThat(waitedMillis).as("waited about the bound").isBetween(190L, 5_000L);
            release();
            assertThat(backend.awaitIdle(Duration.ofSeconds(Long.MAX_VALUE))).as("a bound beyond nanoseconds").isTrue();

            // from a thread that never had the context current (the fake refuses to record an event there)
            AtomicReference<Boolean> idle = new AtomicReference<>();
            Thread.ofPlatform().start(() -> idle.set(backend.awaitIdle(Duration.ofSeconds(5)))).join();
            assertThat(idle.get()).isTrue();
            assertCleanClose(backend);
            assertThatThrownBy(() -> backend.awaitIdle(Duration.ZERO)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        }

        static void closeOnAHungDeviceIsBoundedAndKeepsWhatTheWorkUses() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            CudaBackend backend = open();
            CUstream stream = backend.enter();
            hold(); // the device never finishes what is recorded from here on
            CompletableFuture<Void> stuck = backend.streams().recordWhileOpen(stream);
            long start = System.nanoTime();
            backend.close(Duration.ofMillis(300));
            long tookMillis = (System.nanoTime() - start) / 1_000_000;
            assertThat(tookMillis).as("close waited about its bound, not for the device").isBetween(250L, 5_000L);
            assertThat(stuck).isNotDone();
            Counters after = counters();
            assertThat(after.streams()).as("streams kept under the running work").isPositive();
            assertThat(after.contextReferences()).as("the context kept").isEqualTo(1);
            assertThat(warnings).singleElement().satisfies(warning -> assertThat(warning.getMessage())
                    .contains("did not finish within 300 ms").contains("keeps its streams"));
            release(); // lets the waiter thread end, so the JVM can exit
            stuck.get(5, TimeUnit.SECONDS);
        }

        /**
         * A close on an interrupted thread (a container's shutdown) still waits for the recorded work within its bound
         * and releases the streams, events and context, the interrupt put back. Before, the wait for the calls under
         * way gave up at the interrupt before looking: everything was kept, and a warning blamed a call under way.
         */
        static void aCloseOnAnInterruptedThreadStillReleasesEverything() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            CudaBackend backend = open();
            CUstream stream = backend.enter();
            hold();
            CompletableFuture<Void> recorded = backend.streams().recordWhileOpen(stream);
            Thread releaser = Thread.ofPlatform().start(() -> {
                try {
                    Thread.sleep(200);
                    release();
                } catch (Throwable e) {
                    throw new AssertionError(e);
                }
            });
            Thread.currentThread().interrupt();
            try {
                assertCleanClose(backend);
                assertThat(Thread.currentThread().isInterrupted()).as("the interrupt is put back").isTrue();
            } finally {
                Thread.interrupted();
            }
            assertThat(releaser.join(Duration.ofSeconds(10))).isTrue();
            assertThat(recorded).isCompleted();
            assertThat(warnings).as("nothing kept").isEmpty();
        }

        /**
         * A blocking copy (a Java array into PINNED memory: a host copy after the thread's queued work) behind work that
         * never ends on the thread's stream fails with a DeviceTimeoutException after the device wait, having copied
         * nothing, instead of blocking in cuEventSynchronize for as long as the device does.
         */
        static void aBlockingCopyBehindStuckWorkIsBounded() throws Throwable {
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(300)));
            NativeAllocation pinned = backend.allocate(MemoryLocation.PINNED, 4096);
            CUstream stream = backend.enter();
            hold(); // the device never finishes what is recorded from here on
            CompletableFuture<Void> stuck = backend.streams().recordWhileOpen(stream);
            byte[] ones = new byte[4096];
            Arrays.fill(ones, (byte) 1);
            long start = System.nanoTime();
            assertThatThrownBy(() -> backend.copyToDevice(MemorySegment.ofArray(ones), pinned, 0, 4096))
                    .isInstanceOf(dev.compute.memory.DeviceTimeoutException.class);
            long tookMillis = (System.nanoTime() - start) / 1_000_000;
            assertThat(tookMillis).as("the copy waited about the device wait").isBetween(250L, 5_000L);
            assertThat(pinned.hostSegment().get(ValueLayout.JAVA_BYTE, 0)).as("nothing was copied").isZero();
            release();
            stuck.get(5, TimeUnit.SECONDS);
            backend.copyToDevice(MemorySegment.ofArray(ones), pinned, 0, 4096);
            assertThat(pinned.hostSegment().get(ValueLayout.JAVA_BYTE, 4095)).isEqualTo((byte) 1);
            backend.free(pinned);
            backend.close();
        }

        /**
         * With pinning off the staging buffers are pageable, and a copy from or to pageable memory waits in the driver for
         * the stream's earlier work ("a stream sync is performed before the copy is initiated"), where no device wait
         * bounds it. So every copy, asynchronous ones from the heap too, first waits, bounded, for the work queued ahead:
         * behind work that never ends each fails within about the device wait, leaving nothing queued, rather than hang.
         */
        static void withPinningOffAnyCopyBehindStuckWorkIsBounded() throws Throwable {
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, false, 1 << 20, Map.of("streams", "1"), Duration.ofMillis(300)));
            NativeAllocation device = backend.allocate(MemoryLocation.DEVICE, 3 << 20);
            hold(); // the device never finishes what is recorded from here on
            CompletableFuture<Void> stuck = backend.streams().recordWhileOpen(backend.enter());
            try (Arena arena = Arena.ofShared()) {
                MemorySegment pageable = arena.allocate(3 << 20);
                Map<String, java.util.concurrent.Callable<?>> copies = new java.util.LinkedHashMap<>();
                copies.put("heap to device, asynchronous", () -> backend.copyToDeviceAsync(MemorySegment.ofArray(new byte[4096]), device, 0, 4096));
                copies.put("heap to device", () -> {
                    backend.copyToDevice(MemorySegment.ofArray(new byte[4096]), device, 0, 4096);
                    return null;
                });
                copies.put("pageable to device, asynchronous", () -> backend.copyToDeviceAsync(pageable, device, 0, 4096));
                copies.put("device to heap, asynchronous", () -> backend.copyToHostAsync(device, 0, MemorySegment.ofArray(new byte[4096]), 4096));
                copies.put("device to pageable", () -> backend.copyToHostAsync(device, 0, pageable, 4096));
                copies.put("device to heap, three staging buffers", () -> backend.copyToHostAsync(device, 0, MemorySegment.ofArray(new byte[3 << 20]), 3 << 20));
                for (Map.Entry<String, java.util.concurrent.Callable<?>> copy : copies.entrySet()) {
                    CompletableFuture<Object> outcome = CompletableFuture.supplyAsync(() -> {
                        try {
                            return copy.getValue().call();
                        } catch (Exception e) {
                            throw new java.util.concurrent.CompletionException(e);
                        }
                    }, runnable -> Thread.ofPlatform().daemon().start(runnable));
                    try {
                        assertThatThrownBy(() -> outcome.get(5, TimeUnit.SECONDS)).as(copy.getKey())
                                .isInstanceOf(ExecutionException.class).hasCauseInstanceOf(dev.compute.memory.DeviceTimeoutException.class);
                    } finally {
                        if (!outcome.isDone()) {
                            release(); // let the copy stuck in the driver go, so that the scenario ends
                        }
                    }
                }
                assertThat(heldCopies()[0]).as("copies queued behind the stuck work").isZero();
            }
            release();
            stuck.get(5, TimeUnit.SECONDS);
            backend.free(device);
            assertCleanClose(backend);
        }

        /**
         * A streams option of two billion fails the start with an InvalidSettingException naming it, not with an
         * OutOfMemoryError from a table of that many streams; the context taken meanwhile is given back.
         */
        static void anOptionBeyondItsBoundFailsAtStartNamingIt() throws Throwable {
            for (String option : List.of("streams", "staging-buffers", "staging-lanes", "copy-threads")) {
                assertThatThrownBy(() -> new CudaBackend(DriverLibrary.loadedOrNull(), new BackendSettings(0, true, 1 << 20, Map.of(option, "2000000000"))))
                        .isInstanceOf(dev.compute.memory.InvalidSettingException.class)
                        .hasMessageContaining(option);
            }
            assertThat(counters().contextReferences()).as("context references left").isZero();
        }

        /**
         * A copy within one allocation whose ranges overlap (buffer.copyFrom(buffer, ...)) moves the bytes as memmove
         * does, on DEVICE and UNIFIED memory alike, without handing the driver overlapping ranges, whose result it leaves
         * undefined (the fake refuses them); the temporary it goes through is freed.
         */
        static void anOverlappingCopyWithinOneAllocationMovesTheBytesAsMemmoveDoes() throws Throwable {
            CudaBackend backend = open();
            for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.UNIFIED)) {
                byte[] data = new byte[4096];
                new java.util.Random(7).nextBytes(data);
                NativeAllocation buffer = backend.allocate(location, 4096);
                backend.copyToDevice(MemorySegment.ofArray(data), buffer, 0, data.length);
                backend.copyWithinDevice(buffer, 0, buffer, 100, 3000);
                byte[] expected = data.clone();
                System.arraycopy(data, 0, expected, 100, 3000);
                backend.copyWithinDevice(buffer, 200, buffer, 150, 1000);
                System.arraycopy(expected.clone(), 200, expected, 150, 1000);
                byte[] back = new byte[4096];
                backend.copyToHost(buffer, 0, MemorySegment.ofArray(back), back.length);
                assertThat(back).as("%s memory after two overlapping copies", location).isEqualTo(expected);
                backend.free(buffer);
            }
            assertThat(counters().rejected()).as("calls the driver would refuse or leave undefined").isZero();
            assertThat(counters().device()).as("DEVICE allocations left, temporaries included").isZero();
            backend.close();
        }

        /**
         * A close that begins while a copy is inside the backend (here waiting for stuck work) frees nothing the copy
         * uses: the streams and the context stay, and a warning says so.
         */
        static void closeUnderACopyKeepsWhatTheCopyUses() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofSeconds(3)));
            NativeAllocation pinned = backend.allocate(MemoryLocation.PINNED, 4096);
            CountDownLatch copying = new CountDownLatch(1);
            AtomicReference<Throwable> copyFailure = new AtomicReference<>();
            hold();
            Thread copier = Thread.ofPlatform().start(() -> {
                CUstream stream = backend.enter();
                backend.streams().recordWhileOpen(stream);
                copying.countDown();
                try {
                    backend.copyToDevice(MemorySegment.ofArray(new byte[4096]), pinned, 0, 4096);
                } catch (Throwable t) {
                    copyFailure.set(t);
                }
            });
            copying.await();
            // until the copy is inside the backend (its call counted, so the close waits for it), not a fixed sleep that a
            // loaded machine can outlast before the copier gets there
            long inside = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (Arrays.stream(copier.getStackTrace()).noneMatch(frame -> frame.getClassName().equals(CudaCopies.class.getName()))) {
                assertThat(System.nanoTime()).as("the copier reaches the copy").isLessThan(inside);
                Thread.sleep(1);
            }
            backend.close(Duration.ofMillis(300));
            Counters after = counters();
            assertThat(after.streams()).as("streams kept under the copy").isPositive();
            assertThat(after.contextReferences()).as("the context kept").isEqualTo(1);
            assertThat(warnings).singleElement().satisfies(warning -> assertThat(warning.getMessage()).contains("still under way"));
            copier.join(10_000);
            assertThat(copyFailure.get()).isInstanceOf(dev.compute.memory.DeviceTimeoutException.class);
            release();
        }

        /** Copies the fake holds now, and held copies that found memory of theirs freed when they ran. */
        private static long[] heldCopies() throws Throwable {
            try (Arena scratch = Arena.ofConfined()) {
                MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 2);
                HELD_COPIES.invokeExact(out);
                return out.toArray(ValueLayout.JAVA_LONG);
            }
        }

        /** A manager on the stand-in whose device waits give up after 300 ms. */
        private static UnifiedMemoryManager managerWithAShortDeviceWait() {
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(300)));
            return CudaTestSupport.managerOn(backend).build();
        }

        private static float[] filled(float value) {
            float[] values = new float[1024];
            Arrays.fill(values, value);
            return values;
        }

        /**
         * Blocking copies whose wait times out after they queued work (a copy between two device buffers; a staged copy
         * whose later chunk waits for an earlier one): the device may still run what they queued, so the memory it
         * writes stays out of the pool until the device is past it. A buffer allocated after the target's close does not
         * get its block (the queued copy would overwrite it), a release of the cache does not free it, and the staged
         * copy's lane, abandoned, is not freed under the chunks it holds.
         */
        static void aCopyThatTimedOutOnceQueuedKeepsTheMemoryItUsesUntilTheDeviceIsPastIt() throws Throwable {
            UnifiedMemoryManager manager = managerWithAShortDeviceWait();
            float[] ones = filled(1f);
            float[] twos = filled(2f);
            UnifiedBuffer source = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            source.copyFrom(ones);
            UnifiedBuffer target = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            hold(); // the device does not run what is queued from here on
            assertThatThrownBy(() -> target.copyFrom(source)).isInstanceOf(dev.compute.memory.DeviceTimeoutException.class);
            assertThat(heldCopies()[0]).as("the device-to-device copy, queued before its wait timed out").isEqualTo(1);
            HOLD.invokeExact(0);
            target.close();
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                next.copyFrom(twos);
                release(); // the device runs the queued copy now
                float[] back = new float[1024];
                next.copyTo(back);
                assertThat(back).as("a buffer allocated after the close, which the queued copy must not write").containsOnly(2f);
            }
            source.close();

            int floats = 1 << 20; // 4 MiB: four chunks through a lane of two 1 MiB slots
            float[] values = new float[floats];
            Arrays.fill(values, 3f);
            UnifiedBuffer staged = manager.allocate(DataType.FLOAT32, floats, MemoryLocation.DEVICE);
            hold();
            assertThatThrownBy(() -> staged.copyFrom(values)).isInstanceOf(dev.compute.memory.DeviceTimeoutException.class);
            assertThat(heldCopies()[0]).as("the chunks queued before the wait for the first one's slot timed out").isEqualTo(2);
            HOLD.invokeExact(0);
            staged.close();
            manager.releaseCachedMemory();
            release();
            assertThat(heldCopies()[1]).as("queued copies that found their device block or staging lane freed").isZero();
            manager.close();
        }

        /**
         * A blocking copy from a DEVICE buffer into a confined view of a PINNED buffer (the driver writes the view's
         * memory directly) whose wait times out once queued: the PINNED buffer's memory, which the queued copy still
         * writes, is not handed to the next PINNED allocation.
         */
        static void aCopyIntoAPinnedBuffersViewThatTimedOutOnceQueuedKeepsThatBuffersMemory() throws Throwable {
            UnifiedMemoryManager manager = managerWithAShortDeviceWait();
            copyIntoAViewThatTimesOutOnceQueuedKeepsTheViewedBuffersMemory(manager, manager);
            manager.close();
        }

        /**
         * As {@link #aCopyIntoAPinnedBuffersViewThatTimedOutOnceQueuedKeepsThatBuffersMemory}, the view of a PINNED buffer
         * of another manager, which the copying manager, with pinning off, has the driver write directly as pageable
         * memory: that other manager's buffer keeps its memory from its next allocation while the queued copy may write it.
         */
        static void aCopyIntoAViewOfAnotherManagersBufferThatTimedOutOnceQueuedKeepsThatBuffersMemory() throws Throwable {
            UnifiedMemoryManager copying = CudaTestSupport.managerOn(new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, false, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(300)))).build();
            UnifiedMemoryManager viewed = managerWithAShortDeviceWait();
            copyIntoAViewThatTimesOutOnceQueuedKeepsTheViewedBuffersMemory(copying, viewed);
            viewed.close();
            copying.close();
        }

        /** A DEVICE buffer of {@code copying} copied into a view of a PINNED buffer of {@code viewed}, the copy held. */
        private static void copyIntoAViewThatTimesOutOnceQueuedKeepsTheViewedBuffersMemory(UnifiedMemoryManager copying,
                                                                                          UnifiedMemoryManager viewed) throws Throwable {
            float[] ones = filled(1f);
            float[] twos = filled(2f);
            UnifiedBuffer source = copying.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            source.copyFrom(ones);
            UnifiedBuffer pinned = viewed.allocate(DataType.FLOAT32, 1024, MemoryLocation.PINNED);
            try (ViewScope views = ViewScope.open()) {
                MemorySegment view = pinned.hostView();
                hold(); // the device does not run what is queued from here on
                assertThatThrownBy(() -> source.copyTo(0, view)).isInstanceOf(dev.compute.memory.DeviceTimeoutException.class);
            }
            assertThat(heldCopies()[0]).as("the copy into the view, queued before its wait timed out").isEqualTo(1);
            HOLD.invokeExact(0);
            pinned.close();
            try (UnifiedBuffer next = viewed.allocate(DataType.FLOAT32, 1024, MemoryLocation.PINNED)) {
                next.copyFrom(twos);
                release(); // the device runs the queued copy now
                float[] back = new float[1024];
                next.copyTo(back);
                assertThat(back).as("a PINNED buffer allocated after the close, which the queued copy must not write").containsOnly(2f);
            }
            source.close();
        }

        /**
         * A compaction whose move's copy within the device times out once queued: the place it was moving the buffer to
         * is not handed to the next allocation while the queued copy may still write it.
         */
        static void aCompactionWhoseCopyTimedOutOnceQueuedKeepsThePlaceItWrites() throws Throwable {
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(300)));
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
            int floats = 3 << 18; // 3 MiB: large buffers, two in one segment
            float[] ones = new float[floats];
            Arrays.fill(ones, 1f);
            float[] twos = new float[floats];
            Arrays.fill(twos, 2f);
            UnifiedBuffer first = manager.allocate(DataType.FLOAT32, floats, MemoryLocation.DEVICE);
            UnifiedBuffer moved = manager.allocate(DataType.FLOAT32, floats, MemoryLocation.DEVICE);
            moved.copyFrom(ones);
            first.close(); // a hole before the buffer: the compaction moves it there
            hold();
            assertThatThrownBy(() -> manager.compact(MemoryLocation.DEVICE)).isInstanceOf(dev.compute.memory.DeviceTimeoutException.class);
            assertThat(heldCopies()[0]).as("the move's copy, queued before its wait timed out").isEqualTo(1);
            HOLD.invokeExact(0);
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, floats, MemoryLocation.DEVICE)) {
                next.copyFrom(twos);
                release(); // the device runs the queued copy now
                float[] back = new float[floats];
                next.copyTo(back);
                assertThat(back).as("a buffer allocated after the failed move, which the move's copy must not write").containsOnly(2f);
            }
            float[] kept = new float[floats];
            moved.copyTo(kept);
            assertThat(kept).as("the buffer that failed to move").containsOnly(1f);
            moved.close();
            assertThat(heldCopies()[1]).as("queued copies that found their memory freed").isZero();
            manager.close();
        }

        /** Launches so far, live modules, and the last launch's grid and block, as the fake counts them. */
        private static long[] kernelCounters() throws Throwable {
            try (Arena scratch = Arena.ofConfined()) {
                MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 8);
                KERNEL_COUNTERS.invokeExact(out);
                return out.toArray(ValueLayout.JAVA_LONG);
            }
        }

        /**
         * The kernel API through JCuda on the fake, which runs compute-core's contract kernels on the host: the PTX of
         * the three sources chosen, loaded with the JIT's log asked for, launched on UNIFIED memory (which the fake
         * maps for the host) with each scalar type, slices, two dimensions and the grids they need; launches checked
         * against the PTX; the module unloaded by the close.
         */
        static void ownKernelsLoadLaunchAndUnloadThroughJCuda() throws Throwable {
            CudaBackend backend = open();
            long modulesBefore = kernelCounters()[1];
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
            KernelSource[] affineSources = KernelContractTest.sources("affine", KernelContractTest.AFFINE);
            ComputeKernel affine = manager.kernels().compile(affineSources[0], affineSources[1], affineSources[2]);
            assertThat(affine.source().language()).isEqualTo(KernelSource.Language.PTX);
            assertThat(kernelCounters()[1]).as("one module more").isEqualTo(modulesBefore + 1);

            int n = 1000;
            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, n, MemoryLocation.UNIFIED);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, n, MemoryLocation.UNIFIED)) {
                float[] xs = new float[n];
                for (int i = 0; i < n; i++) {
                    xs[i] = i - 500;
                }
                x.copyFrom(xs);
                affine.launch(LaunchShape.of(n), KernelArg.read(x), KernelArg.write(y), (long) n, 0.5f, 3.0, -1).get(5, TimeUnit.SECONDS);
                long[] launched = kernelCounters();
                assertThat(launched[0]).as("launches").isEqualTo(1);
                assertThat(Arrays.copyOfRange(launched, 2, 8)).as("grid and block").containsExactly(4, 1, 1, 256, 1, 1);
                float[] ys = new float[n];
                y.copyTo(ys);
                for (int i = 0; i < n; i++) {
                    assertThat(ys[i]).as("y[%d]", i).isEqualTo(xs[i] * 0.5f + 2f);
                }

                // slices: the pointer is the slice's first byte, at any offset
                affine.launch(LaunchShape.of(10), KernelArg.read(x.slice(3, 10)), KernelArg.write(y.slice(1, 10)), 10L, 1f, 0.0, 0).join();
                y.copyTo(ys);
                assertThat(ys[0]).isEqualTo(xs[0] * 0.5f + 2f);
                for (int i = 1; i <= 10; i++) {
                    assertThat(ys[i]).as("y[%d]", i).isEqualTo(xs[i + 2]);
                }
                assertThat(ys[11]).isEqualTo(xs[11] * 0.5f + 2f);

                assertThatThrownBy(() -> affine.launch(LaunchShape.of(n), x, y, (long) n, 0.5, 3.0, -1))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 3 (a Double 0.5)").hasMessageContaining("pass a Float");
                assertThat(kernelCounters()[0]).as("a refused launch reaches no driver").isEqualTo(2);
            }

            KernelSource[] iotaSources = KernelContractTest.sources("iota2d", KernelContractTest.IOTA_2D);
            ComputeKernel iota = manager.kernels().compile(iotaSources[0], iotaSources[1], iotaSources[2]);
            try (UnifiedBuffer out = manager.allocate(DataType.INT32, 37 * 19, MemoryLocation.UNIFIED)) {
                iota.launch(LaunchShape.of(37, 19), out, 37, 19).join();
                assertThat(Arrays.copyOfRange(kernelCounters(), 2, 8)).as("16 x 16 blocks by default").containsExactly(3, 2, 1, 16, 16, 1);
                iota.launch(LaunchShape.of(37, 19).withWorkGroup(8, 4), out, 37, 19).join();
                assertThat(Arrays.copyOfRange(kernelCounters(), 2, 8)).as("the blocks given").containsExactly(5, 5, 1, 8, 4, 1);
                int[] values = new int[37 * 19];
                out.copyTo(values);
                assertThat(values[18 * 37 + 36]).isEqualTo(18 * 1000 + 36);
                assertThat(values[37]).isEqualTo(1000);
            }

            // a PTX the JIT refuses: its error log, through JCuda's JIT options, in the message
            assertThatThrownBy(() -> manager.kernels().compile(KernelSource.ptx(CudaKernelTest.BROKEN_PTX, "broken")))
                    .isInstanceOfSatisfying(KernelCompileException.class, e -> {
                        assertThat(e.getMessage()).contains("CUDA_ERROR_INVALID_PTX");
                        assertThat(e.buildLog()).isEqualTo("ptxas fatal   : fake driver: unknown instruction 'bogus_instruction'");
                    });

            CudaNativeDevice cuda = manager.nativeDevice(CudaNativeDevice.class);
            assertThat(cuda.stream()).isSameAs(backend.enter());
            assertThat(cuda.deviceOrdinal()).isZero();

            manager.close();
            assertThat(kernelCounters()[1]).as("the close unloads every module").isZero();
            Counters after = counters();
            assertThat(after.callsWithoutContext()).as("calls made without the context current").isZero();
            assertThat(after.rejected()).as("calls the fake rejected").isZero();
            assertThatThrownBy(cuda::stream).isInstanceOf(IllegalStateException.class);
        }

        /** A launch's events held on the fake device: the buffer closed right after it keeps its block until they complete. */
        static void aKernelsBufferClosedRightAfterTheLaunchWaitsForTheKernel() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).build();
            KernelSource[] sources = KernelContractTest.sources("scale_in_place", KernelContractTest.SCALE_IN_PLACE);
            ComputeKernel scale = manager.kernels().compile(sources[0], sources[1], sources[2]);
            UnifiedBuffer first = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.UNIFIED);
            first.copyFrom(new float[1024]);
            long firstAddress = first.readOnlyHostView().address();
            hold(); // the device does not finish what is recorded from here on
            CompletableFuture<Void> running = scale.launch(LaunchShape.of(1024), first, 1024L, 2f);
            first.close();
            try (UnifiedBuffer next = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.UNIFIED)) {
                assertThat(running).isNotDone();
                assertThat(next.readOnlyHostView().address()).as("the closed buffer's block waits for its kernel").isNotEqualTo(firstAddress);
            }
            release();
            running.get(5, TimeUnit.SECONDS);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            boolean reused = false;
            while (!reused && System.nanoTime() < deadline) {
                try (UnifiedBuffer again = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.UNIFIED)) {
                    reused = again.readOnlyHostView().address() == firstAddress;
                }
            }
            assertThat(reused).as("once the kernel is done, the block goes back to the pool").isTrue();
            manager.close();
        }

        /**
         * A launch whose arguments do not fit the PTX is refused before anything runs (the README): not after syncing a
         * newer host copy to the device behind the stream's held work, nor with a written argument's device copy marked
         * newer for a launch that never ran.
         */
        static void aLaunchWithAWrongArgumentIsRefusedBeforeAnythingRunsOrChanges() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(300)))).build();
            KernelSource[] sources = KernelContractTest.sources("scale_in_place", KernelContractTest.SCALE_IN_PLACE);
            ComputeKernel scale = manager.kernels().compile(sources[0], sources[1], sources[2]);
            try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.UNIFIED);
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                x.copyFrom(new float[1024]);
                try (BufferAccess access = x.hostAccess(AccessMode.WRITE)) {
                    access.segment().fill((byte) 0);
                }
                assertThat(x.state()).isEqualTo(BufferState.HOST_DIRTY);
                hold(); // the stream's work does not end from here on
                CompletableFuture<Void> stuck = scale.launch(LaunchShape.of(1024), held, 1024L, 2f);
                long launches = kernelCounters()[0];

                assertThatThrownBy(() -> scale.launch(LaunchShape.of(1024), KernelArg.write(x), 1024, 2f)) // an int for the long n
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 1").hasMessageContaining("a Long");
                assertThatThrownBy(() -> scale.launch(LaunchShape.of(1024), KernelArg.write(x), 1024L))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("takes 3 argument(s)");
                assertThatThrownBy(() -> scale.launch(LaunchShape.of(1024).withWorkGroup(1 << 20), KernelArg.write(x), 1024L, 2f))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("a block of [1048576, 1, 1]");
                assertThatThrownBy(() -> scale.launch(LaunchShape.of(4, 4, 256).withWorkGroup(1, 1, 128), KernelArg.write(x), 1024L, 2f))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("a block of [1, 1, 128]")
                        .hasMessageContaining("CUDA's block of [1024, 1024, 64]");
                assertThat(x.state()).as("nothing synced, nothing marked newer").isEqualTo(BufferState.HOST_DIRTY);
                assertThat(kernelCounters()[0]).as("a refused launch reaches no driver").isEqualTo(launches);
                release();
                stuck.get(5, TimeUnit.SECONDS);
            }
            manager.close();
        }

        /**
         * A PTX entry that declares {@code .reqntid} (Triton's PTX does) runs only in that block, which the driver's
         * threads per block (512 here) does not say: a shape that leaves the block to the backend gets it (the default of
         * 256 was refused by cuLaunchKernel after the access had synced and marked the buffer), and another block is
         * refused by name before anything runs.
         */
        static void aKernelWhosePtxRequiresABlockGetsItAndAnyOtherIsRefusedBeforeAnythingRuns() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(300)))).build();
            String ptx = KernelContractTest.PTX.replace("\t.param .f32 scale_in_place_param_2\n)", "\t.param .f32 scale_in_place_param_2\n)\n.reqntid 512");
            assertThat(ptx).contains(".reqntid 512");
            ComputeKernel scale = manager.kernels().compile(KernelSource.ptx(ptx, "scale_in_place"));
            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.UNIFIED)) {
                float[] ones = new float[1024];
                Arrays.fill(ones, 1f);
                x.copyFrom(ones);
                scale.launch(LaunchShape.of(1024), x, 1024L, 2f).get(5, TimeUnit.SECONDS);
                assertThat(kernelCounters()).as("launches, modules, grid, block").endsWith(2, 1, 1, 512, 1, 1);

                long launches = kernelCounters()[0];
                try (BufferAccess access = x.hostAccess(AccessMode.WRITE)) {
                    access.segment().fill((byte) 0);
                }
                assertThatThrownBy(() -> scale.launch(LaunchShape.of(1024).withWorkGroup(256), KernelArg.write(x), 1024L, 2f))
                        .isInstanceOf(IllegalArgumentException.class)
                        .hasMessageContaining("a block of [256, 1, 1] threads where the PTX requires [512, 1, 1] (.reqntid)");
                assertThat(kernelCounters()[0]).as("a refused launch reaches no driver").isEqualTo(launches);
                float[] back = new float[1024];
                x.copyTo(back);
                assertThat(back).as("the refused launch changed nothing").containsOnly(0f);
            }
            manager.close();
        }

        /**
         * The refusals of a later argument that opening its access would make (a closed buffer, HOST memory) come before
         * any access opens too: an earlier argument whose host copy is newer is not synced behind the stream's held work,
         * nor marked newer on the device, for a launch that never ran.
         */
        static void aLaunchWithAClosedOrHostBufferIsRefusedBeforeAnythingRunsOrChanges() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(300)))).build();
            KernelSource[] sources = KernelContractTest.sources("affine", KernelContractTest.AFFINE);
            ComputeKernel affine = manager.kernels().compile(sources[0], sources[1], sources[2]);
            try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.UNIFIED);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 UnifiedBuffer host = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.HOST)) {
                UnifiedBuffer closed = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                closed.close();
                y.copyFrom(new float[1024]);
                try (BufferAccess access = y.hostAccess(AccessMode.WRITE)) {
                    access.segment().fill((byte) 0);
                }
                hold(); // the stream's work does not end from here on
                CompletableFuture<Void> stuck = affine.launch(LaunchShape.of(1024), KernelArg.read(held), KernelArg.write(held), 1024L,
                        1f, 0.0, 0);
                long launches = kernelCounters()[0];

                // y, argument 0, written: its access would open first; the buffer refused is argument 1
                assertThatThrownBy(() -> affine.launch(LaunchShape.of(1024), KernelArg.write(y), KernelArg.read(closed), 1024L, 1f, 0.0, 0))
                        .isInstanceOf(IllegalStateException.class).hasMessageContaining("argument 1").hasMessageContaining("closed");
                assertThatThrownBy(() -> affine.launch(LaunchShape.of(1024), KernelArg.write(y), KernelArg.read(host), 1024L, 1f, 0.0, 0))
                        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("argument 1 (UnifiedBuffer[HOST")
                        .hasMessageContaining("which a CUDA kernel cannot reach");
                assertThat(y.state()).as("nothing synced, nothing marked newer").isEqualTo(BufferState.HOST_DIRTY);
                assertThat(kernelCounters()[0]).as("a refused launch reaches no driver").isEqualTo(launches);
                release();
                stuck.get(5, TimeUnit.SECONDS);
            }
            manager.close();
        }

        /**
         * Sixteen threads launch one kernel at once, each on a buffer of its own at one of the three locations (a slice at
         * an odd element for every other one), and each finds its own values; then launches race the manager's close from
         * six threads: each runs or fails with an IllegalStateException, and no call reaches the driver without the context
         * or with a function or memory the close already gave back (the fake counts both), and every module is unloaded.
         */
        static void manyThreadsLaunchOneKernelAndLaunchesRacingTheCloseRunOrAreRefused() throws Throwable {
            KernelSource[] sources = KernelContractTest.sources("scale_in_place", KernelContractTest.SCALE_IN_PLACE);
            List<MemoryLocation> locations = List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED);
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).build();
            ComputeKernel scale = manager.kernels().compile(sources[1]);
            List<CompletableFuture<Void>> threads = new ArrayList<>();
            for (int t = 0; t < 16; t++) {
                int thread = t;
                threads.add(CompletableFuture.runAsync(() -> {
                    int n = 1000 + thread;
                    try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n + 1, locations.get(thread % 3))) {
                        UnifiedBuffer x = thread % 2 == 0 ? buffer.slice(1, n) : buffer.slice(0, n);
                        float[] values = new float[n];
                        Arrays.fill(values, thread + 1);
                        x.copyFrom(values);
                        for (int k = 0; k < 40; k++) {
                            scale.launch(LaunchShape.of(n), x, (long) n, k % 2 == 0 ? 2f : 0.5f);
                        }
                        scale.launch(LaunchShape.of(n), x, (long) n, 3f);
                        x.copyTo(values);
                        for (int i = 0; i < n; i++) {
                            assertThat(values[i]).as("thread %d, element %d", thread, i).isEqualTo(3f * (thread + 1));
                        }
                    }
                }, runnable -> Thread.ofPlatform().start(runnable)));
            }
            CompletableFuture.allOf(threads.toArray(CompletableFuture[]::new)).get(60, TimeUnit.SECONDS);
            manager.close();

            for (int round = 0; round < 10; round++) {
                UnifiedMemoryManager racing = CudaTestSupport.managerOn(open()).build();
                ComputeKernel racingScale = racing.kernels().compile(sources[1]);
                AtomicInteger launched = new AtomicInteger();
                List<Throwable> unexpected = new CopyOnWriteArrayList<>();
                List<Thread> launchers = new ArrayList<>();
                for (int t = 0; t < 6; t++) {
                    MemoryLocation location = locations.get(t % 3);
                    launchers.add(Thread.ofPlatform().start(() -> {
                        while (true) {
                            try (UnifiedBuffer x = racing.allocate(DataType.FLOAT32, 300, location)) {
                                racingScale.launch(LaunchShape.of(299), x.slice(1, 299), 299L, 2f);
                                launched.incrementAndGet();
                            } catch (IllegalStateException closed) {
                                return;
                            } catch (Throwable e) {
                                unexpected.add(e);
                                return;
                            }
                        }
                    }));
                }
                while (launched.get() < 20 && unexpected.isEmpty()) {
                    Thread.onSpinWait();
                }
                racing.close();
                for (Thread launcher : launchers) {
                    launcher.join(10_000);
                }
                assertThat(unexpected).as("round %d: launches fail only as refused by the close", round).isEmpty();
            }
            Counters after = counters();
            assertThat(after.callsWithoutContext()).as("calls made without the context current").isZero();
            assertThat(after.rejected()).as("calls the fake rejected (an unloaded function, a freed handle)").isZero();
            assertThat(kernelCounters()[1]).as("every close unloads its modules").isZero();
        }

        /**
         * The manager closed by a dependent action of a kernel's future, which runs on the backend's callback thread
         * that reports the kernel's end: the close waits for the backend's other callbacks, not for the one it runs in
         * (which ends only once the close returns), and frees everything.
         */
        static void aCloseMadeByAnActionOfADeviceFutureDoesNotWaitForThatAction() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).build();
            ComputeKernel scale = scaleKernel(manager);
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            x.copyFrom(new float[1024]);
            hold(); // the kernel's end is reported once released, after the action below is attached
            CompletableFuture<Void> running = launch(scale, x);
            CompletableFuture<Long> closing = running.thenApply(ignored -> {
                long start = System.nanoTime();
                x.close();
                manager.close();
                return (System.nanoTime() - start) / 1_000_000;
            });
            release();
            assertThat(closing.get(60, TimeUnit.SECONDS)).as("ms the close took, on the thread of the action that made it")
                    .isLessThan(5_000L);
            Counters after = counters();
            assertThat(after.contextReferences()).as("context references").isZero();
            assertThat(after.events()).as("live events").isZero();
            assertThat(after.device()).as("device allocations").isZero();
        }

        /** The scale kernel of the kernel contract, compiled on {@code manager}. */
        private static ComputeKernel scaleKernel(UnifiedMemoryManager manager) {
            KernelSource[] sources = KernelContractTest.sources("scale_in_place", KernelContractTest.SCALE_IN_PLACE);
            return manager.kernels().compile(sources[0], sources[1], sources[2]);
        }

        private static CompletableFuture<Void> launch(ComputeKernel scale, UnifiedBuffer buffer) {
            return scale.launch(LaunchShape.of(Math.toIntExact(buffer.elementCount())), buffer, buffer.elementCount(), 2f);
        }

        /**
         * Holds the device behind a launch on {@code buffer} that the waiter thread already waits for, so that what this
         * thread queues next on its stream is reported as one batch, completed in order by one callback task, once released.
         */
        private static void holdTheWaiter(ComputeKernel scale, UnifiedBuffer buffer) throws Throwable {
            Calls before = Calls.now();
            hold();
            launch(scale, buffer);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (Calls.now().inAllSince(before, Call.EVENT_SYNCHRONIZE) == 0) {
                assertThat(System.nanoTime() - deadline).as("the waiter waits for the held launch within 10 s").isNegative();
                Thread.sleep(1);
            }
        }

        /**
         * Two launches reported in one batch: an action of the first closes the second's buffer, then the manager, whose
         * close waits for that buffer's work, the second launch, which the batch completes only after the action. The
         * close must not wait its timeout for it and then keep the memory as if the device hung: it frees everything.
         */
        static void aCloseMadeByAnActionWaitsForNoWorkOfItsOwnBatch() throws Throwable {
            LogCapture managerLog = LogCapture.managerLog();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).closeTimeout(Duration.ofSeconds(2)).build();
            ComputeKernel scale = scaleKernel(manager);
            UnifiedBuffer held = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            holdTheWaiter(scale, held);
            CompletableFuture<Void> first = launch(scale, x);
            CompletableFuture<Void> second = launch(scale, y);
            CompletableFuture<Void> closing = first.thenRun(() -> {
                held.close();
                x.close();
                y.close();
                manager.close();
            });
            release();
            closing.get(60, TimeUnit.SECONDS);
            second.get(5, TimeUnit.SECONDS);
            Counters after = counters();
            assertThat(after.device()).as("device allocations: the close found the device done, not hung").isZero();
            assertThat(after.contextReferences()).as("context references").isZero();
            assertThat(after.events()).as("live events").isZero();
            assertThat(managerLog.messages(Level.WARNING)).as("the manager's warnings: it kept nothing for work still running").isEmpty();
        }

        /**
         * An op and a launch reported in one batch: an action of the op's future reads the launch's buffer to the host,
         * which waits for the launch, which the batch completes only after the action. The read gets what the launch
         * wrote rather than fail after the device wait.
         */
        static void aHostReadMadeByAnActionGetsWhatLaterWorkOfItsOwnBatchWrote() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).deviceWaitTimeout(Duration.ofSeconds(2)).build();
            ComputeKernel scale = scaleKernel(manager);
            try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                float[] ones = new float[1024];
                Arrays.fill(ones, 1f);
                y.copyFrom(ones);
                holdTheWaiter(scale, held);
                CompletableFuture<Void> first = manager.ops().scaleAsync(x, 2);
                CompletableFuture<Void> second = launch(scale, y);
                CompletableFuture<float[]> read = first.thenApply(ignored -> {
                    float[] back = new float[1024];
                    y.copyTo(back);
                    return back;
                });
                release();
                assertThat(read.get(60, TimeUnit.SECONDS)).as("y read by the action, after the launch on it").containsOnly(2f);
                second.get(5, TimeUnit.SECONDS);
            }
            manager.close();
        }

        /**
         * Two launches reported in one batch: an action of the first waits for the second's future, or one made from
         * it, itself ({@code get}, {@code join}), which the batch completed only after the action: it gets it.
         */
        static void anActionWaitingForALaterFutureOfItsOwnBatchGetsIt() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).build();
            ComputeKernel scale = scaleKernel(manager);
            try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                holdTheWaiter(scale, held);
                CompletableFuture<Void> first = launch(scale, x);
                CompletableFuture<String> second = launch(scale, y).thenApply(ignored -> "second");
                CompletableFuture<String> waited = first.thenApply(ignored -> {
                    try {
                        return second.get(10, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        throw new AssertionError("the action's wait for the second launch", e);
                    }
                });
                release();
                assertThat(waited.get(60, TimeUnit.SECONDS)).isEqualTo("second");
            }
            manager.close();
        }

        /**
         * Two launches reported in one batch: an action of the first closes the second's buffer and allocates, under
         * the location's cap, the memory that buffer gives back once the second launch has ended, which the batch
         * completes only after the action. The allocation gets it, rather than fail after the device wait.
         */
        static void anAllocationMadeByAnActionGetsMemoryFreedByLaterWorkOfItsOwnBatch() throws Throwable {
            int count = 512 << 10; // 2 MiB: one of the pool's segments for large blocks each
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).maxPoolSize(3L * count * Float.BYTES)
                    .deviceWaitTimeout(Duration.ofSeconds(2)).build();
            ComputeKernel scale = scaleKernel(manager);
            UnifiedBuffer held = manager.allocate(DataType.FLOAT32, count, MemoryLocation.DEVICE);
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, count, MemoryLocation.DEVICE);
            UnifiedBuffer y = manager.allocate(DataType.FLOAT32, count, MemoryLocation.DEVICE);
            holdTheWaiter(scale, held);
            CompletableFuture<Void> first = launch(scale, x);
            CompletableFuture<Void> second = launch(scale, y);
            CompletableFuture<UnifiedBuffer> allocated = first.thenApply(ignored -> {
                y.close();
                return manager.allocate(DataType.FLOAT32, count, MemoryLocation.DEVICE);
            });
            release();
            allocated.get(60, TimeUnit.SECONDS).close();
            second.get(5, TimeUnit.SECONDS);
            held.close();
            x.close();
            manager.close();
            assertThat(counters().device()).as("device allocations").isZero();
        }

        /**
         * Two launches reported in one batch: an action of the first blocks without calling the library (on a latch of
         * its own, as a user's action may): the second's future completes all the same, rather than wait for the action.
         */
        static void anActionBlockedWithoutTheLibraryHoldsUpNoLaterFutureOfItsBatch() throws Throwable {
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).closeTimeout(Duration.ofSeconds(10)).build();
            ComputeKernel scale = scaleKernel(manager);
            CountDownLatch blocked = new CountDownLatch(1);
            try (UnifiedBuffer held = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                holdTheWaiter(scale, held);
                CompletableFuture<Void> blocking = launch(scale, x).thenRun(() -> {
                    try {
                        blocked.await(60, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
                CompletableFuture<Void> second = launch(scale, y);
                release();
                second.get(20, TimeUnit.SECONDS);
                assertThat(blocking).as("the first's action, still blocked").isNotDone();
            } finally {
                blocked.countDown();
            }
            manager.close();
            Counters after = counters();
            assertThat(after.device()).as("device allocations").isZero();
            assertThat(after.contextReferences()).as("context references").isZero();
        }

        /**
         * An action that never ends (a user's bug: it waits for something nobody does) on the first of a batch whose
         * second launch a closed buffer's memory waits for: the manager's close ends within its timeout rather than wait
         * the backend's own bound for the action too, and the backend says why it keeps its context.
         */
        static void theManagersCloseUnderAnActionThatNeverEndsIsBoundedAndSaysSo() throws Throwable {
            LogCapture completionsLog = LogCapture.of(DeviceCompletions.class.getName());
            LogCapture backendLog = LogCapture.of(CudaBackend.class.getName());
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(open()).closeTimeout(Duration.ofMillis(500)).build();
            ComputeKernel scale = scaleKernel(manager);
            UnifiedBuffer held = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            holdTheWaiter(scale, held);
            CountDownLatch inside = new CountDownLatch(1);
            CountDownLatch never = new CountDownLatch(1);
            launch(scale, x).thenRun(() -> {
                inside.countDown();
                while (true) {
                    try {
                        never.await();
                        return;
                    } catch (InterruptedException ignored) {
                        // it does not end
                    }
                }
            });
            launch(scale, y);
            y.close();
            release();
            assertThat(inside.await(10, TimeUnit.SECONDS)).as("the action runs").isTrue();
            long start = System.nanoTime();
            manager.close();
            long tookMillis = (System.nanoTime() - start) / 1_000_000;
            never.countDown();
            assertThat(tookMillis).as("ms the close took, its timeout 500 ms, the backend's own bound 10 s").isLessThan(5_000L);
            assertThat(completionsLog.messages(Level.WARNING)).as("the completions' warnings")
                    .anySatisfy(warning -> assertThat(warning).contains("action dependent on a device future"));
            assertThat(backendLog.messages(Level.WARNING)).as("the backend's warnings: the device finished, only the action runs")
                    .noneSatisfy(warning -> assertThat(warning).contains("device may be hung"));
            assertThat(counters().contextReferences()).as("context references, kept under the action").isEqualTo(1);
        }

        /**
         * Work queued on a stream of one's own and recorded through the handle ({@code recordWork}) on a buffer left
         * open: the manager's close waits for it, within its close timeout, like the work on the backend's streams, and
         * keeps the buffer's memory while it still runs rather than free it under the device.
         */
        static void theManagersCloseWaitsForWorkRecordedOnOnesOwnStream() throws Throwable {
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).closeTimeout(Duration.ofMillis(500)).build();
            UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            backend.enter();
            CUstream own = new CUstream();
            CudaResults.check(cuStreamCreate(own, 0), "cuStreamCreate");
            try (dev.compute.memory.BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                hold(); // one's own kernel on the buffer, on one's own stream, does not end
                access.handle(CudaDeviceHandle.class).recordWork(own);
                HOLD.invokeExact(0); // what is recorded from here on completes at once: the access's end on the backend's stream
            }
            long start = System.nanoTime();
            manager.close();
            assertThat((System.nanoTime() - start) / 1_000_000).as("the close waited for the work, within its timeout").isGreaterThanOrEqualTo(400L);
            assertThat(counters().device()).as("the buffer's memory, kept while the device may still write it").isEqualTo(1);
            release();
        }

        /**
         * A staged copy of many chunks through a device that finishes each chunk well within the device wait, but the whole
         * copy only after more than it (a large copy, a slow source such as a file on a slow disk): every wait for the
         * device is bounded on its own, so the copy succeeds in each direction, blocking or queued.
         */
        static void aStagedCopyLongerThanTheDeviceWaitIsBoundedPerWaitNotInAll() throws Throwable {
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "2"), Duration.ofMillis(1000)));
            int bytes = 48 << 20; // 48 chunks of the 1 MiB staging buffers, two of them per copy
            NativeAllocation device = backend.allocate(MemoryLocation.DEVICE, bytes);
            MemorySegment onDevice = MemorySegment.ofAddress(device.address()).reinterpret(bytes); // the fake's device memory is host memory
            byte[] values = new byte[bytes];
            for (int i = 0; i < bytes; i++) {
                values[i] = (byte) (i * 31 + 7);
            }
            hold();
            Thread device100ms = Thread.ofPlatform().daemon().start(() -> { // the device ends what it was given every 100 ms
                try {
                    while (!Thread.currentThread().isInterrupted()) {
                        Thread.sleep(100);
                        release();
                        hold();
                    }
                } catch (InterruptedException ended) {
                    // the scenario is over
                } catch (Throwable t) {
                    throw new AssertionError(t);
                }
            });
            try {
                backend.copyToDevice(MemorySegment.ofArray(values), device, 0, bytes);
                assertThat(onDevice.asByteBuffer()).as("a blocking copy to the device").isEqualTo(java.nio.ByteBuffer.wrap(values));

                onDevice.fill((byte) 0);
                backend.copyToDeviceAsync(MemorySegment.ofArray(values), device, 0, bytes).get(30, TimeUnit.SECONDS);
                assertThat(onDevice.asByteBuffer()).as("a queued copy to the device").isEqualTo(java.nio.ByteBuffer.wrap(values));

                byte[] back = new byte[bytes];
                backend.copyToHost(device, 0, MemorySegment.ofArray(back), bytes);
                assertThat(back).as("a copy to the host").isEqualTo(values);
            } finally {
                device100ms.interrupt();
                device100ms.join();
                release();
            }
            backend.free(device);
            assertCleanClose(backend);
        }

        /**
         * Virtual threads copying through the staging lanes, each wait for the device or the host copy letting them go on
         * on another carrier thread, where other code has another context current or none (here: virtual threads that
         * clear it, as another library or a backend on another GPU would set theirs): every driver call finds the
         * backend's context current.
         */
        static void virtualThreadsGoOnWithTheContextCurrentAfterAWait() throws Throwable {
            System.setProperty("jdk.virtualThreadScheduler.parallelism", "2"); // before the JVM's first virtual thread
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, 1 << 20, Map.of("streams", "4"), Duration.ofSeconds(20)));
            int bytes = 3 << 20; // three chunks of the 1 MiB staging buffers: the third waits for the first's event
            AtomicBoolean done = new AtomicBoolean();
            hold();
            Thread device2ms = Thread.ofPlatform().daemon().start(() -> { // the device ends what it was given every 2 ms
                try {
                    while (!done.get()) {
                        Thread.sleep(2);
                        release();
                        hold();
                    }
                } catch (Throwable t) {
                    throw new AssertionError(t);
                }
            });
            List<Thread> otherCode = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                otherCode.add(Thread.ofVirtual().start(() -> {
                    while (!done.get()) {
                        JCudaDriver.cuCtxSetCurrent(new CUcontext()); // no context current on this carrier thread
                        LockSupport.parkNanos(1_000_000);
                    }
                }));
            }
            Queue<Throwable> failures = new ConcurrentLinkedQueue<>();
            List<Thread> copiers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                copiers.add(Thread.ofVirtual().start(() -> {
                    try {
                        NativeAllocation device = backend.allocate(MemoryLocation.DEVICE, bytes);
                        byte[] values = new byte[bytes];
                        for (int i = 0; i < 10; i++) {
                            Arrays.fill(values, (byte) i);
                            backend.copyToDevice(MemorySegment.ofArray(values), device, 0, bytes);
                            Arrays.fill(values, (byte) -1);
                            backend.copyToHost(device, 0, MemorySegment.ofArray(values), bytes);
                            assertThat(values[bytes - 1]).isEqualTo((byte) i);
                        }
                        backend.free(device);
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            for (Thread copier : copiers) {
                copier.join();
            }
            done.set(true);
            for (Thread other : otherCode) {
                other.join();
            }
            device2ms.join();
            release();
            assertThat(failures).as("what the copies threw").isEmpty();
            assertCleanClose(backend);
        }

        static void closeKeepsTheContextWhilePinnedOrManagedMemoryIsLive() throws Throwable {
            List<LogRecord> warnings = backendWarnings();

            // everything freed: the reference goes back, and the last one resets the context
            CudaBackend tidy = open();
            for (MemoryLocation location : MemoryLocation.values()) {
                tidy.free(tidy.allocate(location, 4096));
            }
            assertCleanClose(tidy);
            assertThat(counters().resets()).isEqualTo(1);
            assertThat(warnings).isEmpty();

            // PINNED and UNIFIED memory left live (as a manager leaves what a thread may still reach): the context stays
            CudaBackend keeping = open();
            NativeAllocation pinned = keeping.allocate(MemoryLocation.PINNED, 1 << 20);
            NativeAllocation managed = keeping.allocate(MemoryLocation.UNIFIED, 1 << 16);
            keeping.allocate(MemoryLocation.DEVICE, 1 << 16);
            keeping.close();
            Counters after = counters();
            assertThat(after.contextReferences()).as("the backend's reference is kept").isEqualTo(1);
            assertThat(after.resets()).as("no second reset").isEqualTo(1);
            assertThat(after.pinned()).isEqualTo(1);
            assertThat(after.managed()).isEqualTo(1);
            assertThat(after.streams()).as("streams are destroyed all the same").isZero();
            assertThat(after.events()).isZero();
            assertThat(warnings).singleElement().satisfies(warning -> assertThat(warning.getMessage())
                    .contains("2 PINNED or UNIFIED allocation(s) of " + ((1 << 20) + (1 << 16)) + " bytes")
                    .contains("keeps its reference to the device's primary context"));
            // still mapped: the fake unmaps on reset, and touching unmapped memory would crash this JVM
            pinned.hostSegment().fill((byte) 3);
            managed.hostSegment().fill((byte) 4);
            assertThat(pinned.hostSegment().get(ValueLayout.JAVA_BYTE, (1 << 20) - 1)).isEqualTo((byte) 3);
            assertThat(managed.hostSegment().get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 4);
        }

        /**
         * A free the driver refuses leaves the memory allocated, and the caller's: the backend goes on counting it, so
         * that its close keeps the context that maps it; a later free that the driver takes counts it out.
         */
        static void memoryWhoseFreeFailedStaysCountedAsLive() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            CudaBackend backend = open();
            NativeAllocation refused = backend.allocate(MemoryLocation.PINNED, 4096);
            NativeAllocation retried = backend.allocate(MemoryLocation.PINNED, 8192);
            for (NativeAllocation allocation : List.of(refused, retried)) {
                FAIL_FREE.invokeExact(allocation.address());
                assertThatThrownBy(() -> backend.free(allocation)).isInstanceOf(RuntimeException.class).hasMessageContaining("999");
            }
            backend.free(retried);
            backend.close();
            assertThat(counters().contextReferences()).as("the context kept for the PINNED allocation still live").isEqualTo(1);
            assertThat(warnings).singleElement().satisfies(warning -> assertThat(warning.getMessage())
                    .contains("1 PINNED or UNIFIED allocation(s) of 4096 bytes"));
            refused.hostSegment().fill((byte) 5); // still mapped: touching unmapped memory would crash this JVM
        }

        static void aViewHeldPastTheManagersCloseStaysMapped() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).closeTimeout(Duration.ofMillis(200)).build();
            UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.PINNED);
            CountDownLatch viewTaken = new CountDownLatch(1);
            CountDownLatch managerClosed = new CountDownLatch(1);
            AtomicReference<Object> seen = new AtomicReference<>();
            Thread holder = Thread.ofPlatform().start(() -> {
                try (ViewScope views = ViewScope.open()) { // a confined view: only its thread can end it
                    MemorySegment view = buffer.hostView();
                    view.fill((byte) 7);
                    viewTaken.countDown();
                    managerClosed.await();
                    view.set(ValueLayout.JAVA_BYTE, 4095, (byte) 8);
                    seen.set(view.get(ValueLayout.JAVA_BYTE, 0) + view.get(ValueLayout.JAVA_BYTE, 4095));
                } catch (Throwable t) {
                    seen.set(t);
                }
            });
            viewTaken.await();
            manager.close(); // the view is still open on the holder thread when the close timeout passes
            Counters after = counters();
            assertThat(after.contextReferences()).as("the context stays with the kept memory").isEqualTo(1);
            assertThat(after.resets()).isZero();
            assertThat(after.pinned()).as("the pinned segment the manager kept").isEqualTo(1);
            assertThat(warnings).hasSize(1);
            managerClosed.countDown();
            holder.join();
            assertThat(seen.get()).as("what the holder read through its view after the close").isEqualTo(15);
        }

        static void aDeviceAccessHeldPastTheManagersCloseKeepsItsStreamAndMemory() throws Throwable {
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).closeTimeout(Duration.ofMillis(200)).build();
            UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE);
            CountDownLatch handleTaken = new CountDownLatch(1);
            CountDownLatch managerClosed = new CountDownLatch(1);
            AtomicReference<Object> seen = new AtomicReference<>();
            Thread holder = Thread.ofPlatform().start(() -> {
                try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                    CudaDeviceHandle handle = access.handle(CudaDeviceHandle.class);
                    CUdeviceptr pointer = handle.pointer();
                    CUstream stream = handle.stream();
                    handleTaken.countDown();
                    managerClosed.await();
                    // the holder's own work on what its access gave, while the access is still open
                    byte[] sevens = new byte[4096];
                    Arrays.fill(sevens, (byte) 7);
                    int written = JCudaDriver.cuMemcpyHtoDAsync(pointer, jcuda.Pointer.to(sevens), 4096, stream);
                    byte[] back = new byte[4096];
                    int read = JCudaDriver.cuMemcpyDtoHAsync(jcuda.Pointer.to(back), pointer, 4096, stream);
                    seen.set(written + "," + read + "," + back[4095]);
                } catch (Throwable t) {
                    seen.set(t);
                }
            });
            handleTaken.await();
            manager.close(); // the access is still open on the holder thread when the close timeout passes
            Counters after = counters();
            assertThat(after.contextReferences()).as("the context stays with the memory the open access reaches").isEqualTo(1);
            assertThat(after.resets()).isZero();
            assertThat(after.device()).as("the device memory the manager kept").isEqualTo(1);
            assertThat(after.streams()).as("the access's stream is kept").isPositive();
            managerClosed.countDown();
            holder.join();
            assertThat(seen.get()).as("the holder's copies through its handle after the close").isEqualTo("0,0,7");
        }

        /**
         * Runs {@code call} on a thread held, as by a debugger, at the start of {@link CudaAllocator}'s {@code method},
         * closes {@code backend} on another, checks that the close waits in {@code closeWaitsIn} for it ({@code what}),
         * then lets the call go on and both end: the call's failure, null where none.
         */
        private static Throwable closedUnderAHeldCall(CudaBackend backend, String method, String closeWaitsIn, String what, Runnable call)
                throws Exception {
            AtomicReference<Throwable> failure = new AtomicReference<>();
            try (Breakpoint breakpoint = Breakpoint.at(CudaAllocator.class, method, 1, "held-call")) {
                Thread held = Thread.ofPlatform().name("held-call").start(() -> {
                    try {
                        call.run();
                    } catch (Throwable t) {
                        failure.set(t);
                    }
                });
                breakpoint.awaitHit(60);
                Thread closing = Thread.ofPlatform().name("closing").start(backend::close);
                // until the close waits for the call under way, or has returned
                while (closing.isAlive() && !(closing.getState() == Thread.State.TIMED_WAITING && Arrays.stream(closing.getStackTrace())
                        .anyMatch(frame -> frame.getMethodName().equals(closeWaitsIn)))) {
                    Thread.onSpinWait();
                }
                assertThat(closing.isAlive()).as("the close waits for %s", what).isTrue();
                breakpoint.release();
                held.join();
                closing.join();
            }
            return failure.get();
        }

        /**
         * An allocation held, as by a debugger, past the backend's open check and before its first driver call, while
         * another thread closes the backend; then let go.
         */
        static void closeWaitsForAnAllocationUnderWay() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
                long referencesBefore = counters().contextReferences();
                CudaBackend backend = open();
                AtomicReference<NativeAllocation> allocation = new AtomicReference<>();
                Throwable failure = closedUnderAHeldCall(backend, "allocate", "awaitCallsEnded", location + ": the allocation under way",
                        () -> allocation.set(backend.allocate(location, 4096)));
                assertThat(failure).as("%s allocation", location).isNull();
                Counters after = counters();
                if (location == MemoryLocation.DEVICE) {
                    assertThat(after.contextReferences()).as("DEVICE memory goes with the context, as any the pool left").isEqualTo(referencesBefore);
                } else { // made before the close looked for live host memory: the context is kept for it
                    assertThat(after.contextReferences()).as("%s: the context is kept", location).isEqualTo(referencesBefore + 1);
                    allocation.get().hostSegment().fill((byte) 9);
                }
            }
            assertThat(warnings).hasSize(2);
        }

        /**
         * A free held, as by a debugger, past the backend's open check and before its driver call, while another thread
         * closes the backend: the close waits for it before it releases the context (whose reset unmaps the memory, so
         * the free would give back memory that is gone, or a later context's at the same address), then goes through.
         */
        static void closeWaitsForAFreeUnderWayBeforeItReleasesTheContext() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
                CudaBackend backend = open();
                NativeAllocation allocation = backend.allocate(location, 4096);
                Throwable failure = closedUnderAHeldCall(backend, "free", "awaitFreesEnded", location + ": the free under way",
                        () -> backend.free(allocation));
                assertThat(failure).as("%s: the free begun before the close", location).isNull();
                Counters after = counters();
                assertThat(after.rejected()).as("%s: calls the fake rejected", location).isZero();
                assertThat(after.contextReferences()).as("%s: the context released once the free ended", location).isZero();
                assertThat(after.pinned() + after.managed() + after.device()).as("%s: live memory", location).isZero();
            }
            assertThat(warnings).as("warnings").isEmpty();
        }

        /** A stream the native device is making as close begins (held past the open check) is made before the close destroys the streams, not after. */
        static void closeWaitsForANativeStreamBeingMade() throws Throwable {
            CudaBackend backend = open();
            AtomicReference<Throwable> failure = new AtomicReference<>();
            try (Breakpoint breakpoint = Breakpoint.at(CudaContext.class, "makeCurrent", 1, "streaming")) {
                Thread streaming = Thread.ofPlatform().name("streaming").start(() -> {
                    try {
                        backend.nativeDevice().stream();
                    } catch (Throwable t) {
                        failure.set(t);
                    }
                });
                breakpoint.awaitHit(60);
                Thread closing = Thread.ofPlatform().name("closing").start(backend::close);
                // until the close waits for the calls under way, or has returned
                while (closing.isAlive() && !(closing.getState() == Thread.State.TIMED_WAITING && Arrays.stream(closing.getStackTrace())
                        .anyMatch(frame -> frame.getMethodName().equals("awaitCallsEnded")))) {
                    Thread.onSpinWait();
                }
                assertThat(closing.isAlive()).as("the close waits for the stream being made").isTrue();
                breakpoint.release();
                streaming.join();
                closing.join();
            }
            assertThat(failure.get()).as("the stream asked for before the close").isNull();
            Counters after = counters();
            assertThat(after.streams()).as("live streams: the close destroyed the one made before it").isZero();
            assertThat(after.contextReferences()).as("context references").isZero();
            assertThat(after.callsWithoutContext()).as("calls made without the context current").isZero();
            assertThat(after.rejected()).as("calls the fake rejected").isZero();
        }

        /**
         * A map of virtual memory under way as close begins (held past its entry) ends before the close frees what it
         * uses (the context, the structs it passes the driver), and the close goes through.
         */
        static void closeWaitsForAVirtualMemoryMapUnderWay() throws Throwable {
            VMM.invokeExact(1);
            List<LogRecord> warnings = backendWarnings();
            CudaBackend backend = open();
            VirtualMemory virtualMemory = backend.virtualMemory(MemoryLocation.DEVICE).orElseThrow();
            NativeAllocation range = virtualMemory.reserve(virtualMemory.granularity());
            AtomicReference<Throwable> failure = new AtomicReference<>();
            AtomicReference<Throwable> closeFailure = new AtomicReference<>();
            try (Breakpoint breakpoint = Breakpoint.at(CudaVirtualMemory.class, "map", 1, "mapping")) {
                Thread mapping = Thread.ofPlatform().name("mapping").start(() -> {
                    try {
                        virtualMemory.map(range, 0, virtualMemory.granularity());
                    } catch (Throwable t) {
                        failure.set(t);
                    }
                });
                breakpoint.awaitHit(60);
                Thread closing = Thread.ofPlatform().name("closing").start(() -> {
                    try {
                        backend.close();
                    } catch (Throwable t) {
                        closeFailure.set(t);
                    }
                });
                // until the close waits for the calls under way, or has returned
                while (closing.isAlive() && !(closing.getState() == Thread.State.TIMED_WAITING && Arrays.stream(closing.getStackTrace())
                        .anyMatch(frame -> frame.getMethodName().equals("awaitCallsEnded")))) {
                    Thread.onSpinWait();
                }
                assertThat(closing.isAlive()).as("the close waits for the map under way").isTrue();
                breakpoint.release();
                mapping.join();
                closing.join();
            }
            assertThat(failure.get()).as("the map begun before the close").isNull();
            assertThat(closeFailure.get()).as("the close").isNull();
            assertThat(counters().rejected()).as("calls the fake rejected").isZero();
            assertThat(warnings).as("warnings").isEmpty();
            assertThatThrownBy(() -> virtualMemory.reserve(virtualMemory.granularity())).as("a reserve after the close")
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        }

        /** The manager's close ends the closing thread's own access and frees its memory: nothing is kept for its handle. */
        static void theManagersCloseOnAThreadHoldingADeviceAccessReleasesEverything() throws Throwable {
            List<LogRecord> warnings = backendWarnings();
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
            UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE);
            BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE);
            access.handle(CudaDeviceHandle.class);
            manager.close();
            Counters after = counters();
            assertThat(after.contextReferences()).as("context references").isZero();
            assertThat(after.streams()).as("live streams").isZero();
            assertThat(after.device()).as("device memory").isZero();
            assertThat(warnings).as("the backend's warnings").isEmpty();
            access.close();
        }

        /**
         * A trim stuck in the driver's unmap (pages mapped) or free (plain segments), as on a hung device, holds up neither
         * an allocation that needs memory of its own nor a read of the figures: neither waits on a driver call of the
         * trim's. Once the driver returns, the trim gives the memory back and the figures say so.
         */
        static void aTrimStuckInTheDriverHoldsUpNoAllocationNorFigureRead() throws Throwable {
            for (int vmm : new int[] {1, 0}) {
                VMM.invokeExact(vmm);
                CudaBackend backend = open();
                try (UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build()) {
                    manager.allocate(8 << 20, MemoryLocation.DEVICE).close();
                    long reserved = manager.statistics(MemoryLocation.DEVICE).reservedBytes();
                    BLOCK_FREES.invokeExact();
                    CompletableFuture<Long> trim = new CompletableFuture<>();
                    Thread.ofPlatform().name("trimming").start(() -> {
                        try {
                            trim.complete(manager.releaseCachedMemory());
                        } catch (Throwable t) {
                            trim.completeExceptionally(t);
                        }
                    });
                    try {
                        while ((int) BLOCKED_FREES.invokeExact() == 0) {
                            assertThat(trim).as("the trim, before it reached the driver").isNotDone();
                            Thread.onSpinWait();
                        }
                        CompletableFuture<UnifiedBuffer> allocation = CompletableFuture.supplyAsync(() -> manager.allocate(4096, MemoryLocation.DEVICE));
                        assertThat(allocation).as("an allocation while the trim is in the driver (vmm %d)", vmm).succeedsWithin(Duration.ofSeconds(20));
                        CompletableFuture<dev.compute.memory.MemoryStatistics> figures = CompletableFuture.supplyAsync(() -> manager.statistics(MemoryLocation.DEVICE));
                        assertThat(figures).as("the figures while the trim is in the driver (vmm %d)", vmm).succeedsWithin(Duration.ofSeconds(20))
                                .satisfies(stats -> assertThat(stats.reservedBytes()).as("what the driver has not given back yet").isGreaterThanOrEqualTo(reserved));
                        allocation.join().close();
                        // a block the trim's memory cannot serve: new pages mapped in the range the trim unmaps from (vmm 1)
                        CompletableFuture<UnifiedBuffer> growing = CompletableFuture.supplyAsync(() -> manager.allocate(8 << 20, MemoryLocation.DEVICE));
                        assertThat(growing).as("an allocation mapping new pages while the trim is in the driver (vmm %d)", vmm)
                                .succeedsWithin(Duration.ofSeconds(20));
                        growing.join().close();
                    } finally {
                        UNBLOCK_FREES.invokeExact();
                    }
                    assertThat(trim).succeedsWithin(Duration.ofSeconds(20)).satisfies(released -> assertThat(released).isGreaterThanOrEqualTo(8L << 20));
                    manager.releaseCachedMemory();
                    dev.compute.memory.MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
                    assertThat(after.reservedBytes()).as("reserved after giving back all (vmm %d)", vmm).isZero();
                    assertThat(after.cachedBytes()).isZero();
                    assertThat(after.segments()).isLessThanOrEqualTo(2); // the ranges stay reserved, address space only
                }
                assertThat(counters().rejected()).as("calls the fake rejected").isZero();
                assertThat(counters().device()).as("device memory left").isZero();
            }
        }

        /**
         * A trim whose unmap the driver refuses leaves the pages mapped and the pool's: the figures as before the trim, the
         * pages reused by the next allocation without a map, and given back by the next trim.
         */
        static void aTrimWhoseUnmapTheDriverRefusesLeavesThePoolAndFiguresAsTheyWere() throws Throwable {
            VMM.invokeExact(1);
            CudaBackend backend = open();
            try (UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build()) {
                long address = cachedAfterADeviceRead(manager);
                dev.compute.memory.MemoryStatistics before = manager.statistics(MemoryLocation.DEVICE);
                FAIL_UNMAP.invokeExact(address);
                assertThatThrownBy(manager::releaseCachedMemory).hasMessageContaining("999");
                dev.compute.memory.MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
                assertThat(after.reservedBytes()).isEqualTo(before.reservedBytes()).isPositive();
                assertThat(after.cachedBytes()).isEqualTo(before.cachedBytes());
                // the trim put back a block whose stream work had completed (a read leaves it pending): one free block now
                assertThat(after.largestFreeBlockBytes()).isEqualTo(after.cachedBytes());
                assertThat(after.backendFrees()).isEqualTo(before.backendFrees());
                manager.allocate(8 << 20, MemoryLocation.DEVICE).close();
                assertThat(manager.statistics(MemoryLocation.DEVICE).backendAllocations()).as("the pages reused, not mapped again")
                        .isEqualTo(before.backendAllocations());
                assertThat(manager.releaseCachedMemory()).isEqualTo(before.reservedBytes());
                assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
            }
            assertThat(counters().rejected()).as("calls the fake rejected").isZero();
        }

        /**
         * A trim's unmap fails part way and a page it had unmapped cannot be mapped back: the pool books that page unmapped
         * (its reserved bytes are the driver's live pages), and maps it again before a block on it is handed out.
         */
        static void aTrimWhoseUnmapLeavesAPageUnmappedBooksItSoAndMapsItBeforeReuse() throws Throwable {
            VMM.invokeExact(1);
            CudaBackend backend = open();
            long page = 2 << 20;
            try (UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build()) {
                long address = cachedAfterADeviceRead(manager);
                dev.compute.memory.MemoryStatistics before = manager.statistics(MemoryLocation.DEVICE);
                assertThat(before.reservedBytes()).isEqualTo(livePages() * page);
                FAIL_UNMAP.invokeExact(address + 2 * page);
                FAIL_MAP.invokeExact(address + page);
                assertThatThrownBy(manager::releaseCachedMemory).isInstanceOf(PartialUnmapException.class).hasMessageContaining("999");
                dev.compute.memory.MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
                assertThat(after.reservedBytes()).as("the page left unmapped").isEqualTo(before.reservedBytes() - page)
                        .isEqualTo(livePages() * page);
                manager.allocate(8 << 20, MemoryLocation.DEVICE).close();
                assertThat(manager.statistics(MemoryLocation.DEVICE).backendAllocations()).as("the page mapped again")
                        .isEqualTo(before.backendAllocations() + 1);
                assertThat(manager.releaseCachedMemory()).as("every page unmapped once, none twice").isEqualTo(before.reservedBytes());
                assertThat(livePages()).isZero();
            }
            assertThat(counters().rejected()).as("calls the fake rejected").isZero();
        }

        /**
         * Allocates 8 MiB of DEVICE, reads it through a device access and closes it; returns its address once its memory is
         * cached. The read's stream work ends at once on the fake, but its end is seen on another thread: until then the
         * block is held by device work, not cached, and the figures to compare with would depend on that race.
         */
        private static long cachedAfterADeviceRead(UnifiedMemoryManager manager) throws InterruptedException {
            UnifiedBuffer buffer = manager.allocate(8 << 20, MemoryLocation.DEVICE);
            long address;
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ)) {
                address = access.handle(CudaDeviceHandle.class).address();
            }
            buffer.close();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (manager.statistics(MemoryLocation.DEVICE).heldBytes() != 0 && System.nanoTime() - deadline < 0) {
                Thread.sleep(1);
            }
            assertThat(manager.statistics(MemoryLocation.DEVICE).heldBytes()).as("the read's stream work seen ended").isZero();
            return address;
        }

        /**
         * A device without concurrent managed access (a GPU before Pascal; Windows and WSL with any GPU) gives the GPU
         * all managed memory alone while any kernel runs: a host read or write of it then faults, which would end the
         * JVM (a host view of a UNIFIED buffer while another thread's kernel runs). UNIFIED is not offered there, saying
         * why, and nothing managed is allocated; the other locations are.
         */
        static void unifiedMemoryIsNotOfferedWhereTheHostMayNotTouchItWhileAKernelRuns() throws Throwable {
            EXCLUSIVE_MANAGED_ACCESS.invokeExact(1);
            CudaBackend backend = open();
            assertThat(backend.supports(MemoryLocation.UNIFIED).available()).isFalse();
            assertThat(backend.supports(MemoryLocation.UNIFIED).detail()).contains("concurrent managed access");
            assertThatThrownBy(() -> backend.allocate(MemoryLocation.UNIFIED, 4096)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("concurrent managed access");
            try (UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build()) {
                assertThat(manager.locations()).containsExactlyInAnyOrder(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.HOST);
                assertThatThrownBy(() -> manager.allocate(4096, MemoryLocation.UNIFIED)).hasMessageContaining("concurrent managed access");
                manager.allocate(4096, MemoryLocation.DEVICE).close();
            }
            assertThat(counters().managed()).as("managed allocations").isZero();
            assertThat(counters().rejected()).as("calls the fake rejected").isZero();
        }

        /**
         * Staged copies at sizes around the staging buffer's (1 byte, a buffer less one, one, one and a byte, two, two and a
         * byte, more buffers than a lane has), both ways, synchronous and asynchronous, with pinning on and off, through
         * a device that ends what it was given every 2 ms: a slot refilled before the device had read it, or read out
         * before the device had written it, shows as wrong bytes. An asynchronous copy to the device returns once its
         * last chunk is queued, with the source read: changing the source then changes nothing the device gets.
         */
        static void stagedCopiesAreByteExactAtEveryChunkBoundaryBehindASlowDevice() throws Throwable {
            long chunk = CudaTestSupport.ODD_STAGING_BYTES;
            java.util.Random random = new java.util.Random(7);
            for (boolean pinning : new boolean[] {true, false}) {
                CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                        new BackendSettings(0, pinning, chunk, Map.of("streams", "1", "copy-threads", "3"), Duration.ofSeconds(20)));
                AtomicBoolean done = new AtomicBoolean();
                hold();
                Thread slowDevice = Thread.ofPlatform().daemon().start(() -> {
                    try {
                        while (!done.get()) {
                            Thread.sleep(2);
                            release();
                            hold();
                        }
                    } catch (Throwable t) {
                        throw new AssertionError(t);
                    }
                });
                try (Arena arena = Arena.ofShared()) {
                    for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.UNIFIED)) {
                        NativeAllocation target = backend.allocate(location, 4 * chunk + 64);
                        for (long size : new long[] {0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 1, 3 * chunk + 7}) {
                            String what = (pinning ? "pinned" : "pageable") + " staging, " + location + ", " + size + " bytes";
                            byte[] data = new byte[(int) size];
                            random.nextBytes(data);
                            backend.copyToDevice(MemorySegment.ofArray(data), target, 3, size);
                            byte[] back = new byte[(int) size];
                            backend.copyToHost(target, 3, MemorySegment.ofArray(back), size);
                            assertThat(Arrays.mismatch(back, data)).as("%s, heap, synchronous: the first wrong byte", what).isEqualTo(-1);

                            byte[] source = data.clone();
                            CompletableFuture<Void> in = backend.copyToDeviceAsync(MemorySegment.ofArray(source), target, 5, size);
                            Arrays.fill(source, (byte) 0x5a); // read already: the device still gets data
                            in.get(20, TimeUnit.SECONDS);
                            MemorySegment landed = arena.allocate(Math.max(1, size));
                            backend.copyToHostAsync(target, 5, landed, size).get(20, TimeUnit.SECONDS);
                            assertThat(landed.asSlice(0, size).mismatch(MemorySegment.ofArray(data)))
                                    .as("%s, heap in, native out, asynchronous: the first wrong byte", what).isEqualTo(-1);
                        }
                        backend.free(target);
                    }
                } finally {
                    done.set(true);
                    slowDevice.join();
                    release();
                }
                assertCleanClose(backend);
            }
        }

        /**
         * The op set's kernels are PTX for compute capability 7.0, which the driver cannot compile for an older GPU (a
         * P100 is 6.0): there the backend would fail at its start, loading them, and so would {@code auto}, which takes
         * the available backend of highest priority. The probe says why instead, so {@code auto} passes CUDA over and
         * {@code cuda} fails with the reason; 7.0 (a V100) and later are available, 7.5 (a T4) among them.
         */
        static void aGpuBeforeVoltaIsPassedOverWithItsReasonRatherThanFailingAtStart() throws Throwable {
            CudaBackendProvider provider = new CudaBackendProvider();
            BackendSettings settings = BackendSettings.ofDevice(0);
            COMPUTE_CAPABILITY.invokeExact(6, 0);
            BackendAvailability pascal = provider.availability(settings);
            assertThat(pascal.available()).isFalse();
            assertThat(pascal.detail()).isEqualTo("device 0 (Stub GPU 0) has compute capability 6.0; this backend's kernels are"
                    + " PTX for compute capability 7.0 (Volta) or later, which the driver cannot compile for it");
            assertThatThrownBy(() -> BackendSelection.choose("auto", settings, List.of(provider)))
                    .isInstanceOf(BackendUnavailableException.class).hasMessageContaining("compute capability 6.0");
            assertThatThrownBy(() -> provider.create(settings)).isInstanceOf(BackendUnavailableException.class)
                    .hasMessageContaining("compute capability 6.0");
            assertThat(counters().contextReferences()).as("nothing opened").isZero();

            COMPUTE_CAPABILITY.invokeExact(7, 5);
            assertThat(provider.availability(settings).available()).isTrue();
            assertCleanClose((CudaBackend) provider.create(settings));
        }

        /** A lookup of the op set's kernels failing at the backend's start (the third of eight) unloads the op module. */
        static void anOpKernelMissingAtStartLeavesNoModuleLoaded() throws Throwable {
            FAIL_FUNCTION_LOOKUP.invokeExact(3);
            assertThatThrownBy(Scenarios::open).isInstanceOf(CudaException.class).hasMessageContaining("cuModuleGetFunction(scale_f32");
            assertThat(kernelCounters()[1]).as("modules loaded").isZero();
            assertThat(counters().contextReferences()).as("context references").isZero();
            assertCleanClose(open());
            assertThat(kernelCounters()[1]).as("modules loaded after a clean start and close").isZero();
        }

        /**
         * Where the driver has no page-locked memory for a staging buffer, copies from and to Java memory are staged through
         * ordinary memory instead of failing: the copy itself needs no pinned memory. The shortage is said once; once pinned
         * memory can be had again, the next copy swaps the pageable lane for a pinned one.
         */
        static void copiesFromAndToJavaMemoryAreStillDoneWherePinnedMemoryForStagingIsShort() throws Throwable {
            long chunk = CudaTestSupport.ODD_STAGING_BYTES;
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, true, chunk, Map.of("streams", "1", "staging-lanes", "1"), Duration.ofSeconds(20)));
            NativeAllocation target = backend.allocate(MemoryLocation.DEVICE, 3 * chunk);
            byte[] data = new byte[(int) (3 * chunk)];
            new java.util.Random(11).nextBytes(data);
            try (LogCapture log = LogCapture.of(StagingBuffers.class.getName())) {
                FAIL_HOST_ALLOC.invokeExact(1);
                for (int round = 0; round < 2; round++) {
                    backend.copyToDevice(MemorySegment.ofArray(data), target, 0, data.length);
                    byte[] back = new byte[data.length];
                    backend.copyToHost(target, 0, MemorySegment.ofArray(back), back.length);
                    assertThat(Arrays.mismatch(back, data)).as("round %d, pinned memory short: the first wrong byte", round).isEqualTo(-1);
                    byte[] async = new byte[data.length];
                    backend.copyToHostAsync(target, 0, MemorySegment.ofArray(async), async.length).get(20, TimeUnit.SECONDS);
                    assertThat(Arrays.mismatch(async, data)).as("round %d, asynchronous: the first wrong byte", round).isEqualTo(-1);
                }
                assertThat(counters().pinned()).as("pinned allocations while short").isZero();
                assertThat(log.messages(Level.WARNING)).as("the shortage said once").singleElement()
                        .satisfies(message -> assertThat(message).contains("page-locked memory", "CUDA_ERROR_OUT_OF_MEMORY"));

                FAIL_HOST_ALLOC.invokeExact(0);
                Arrays.fill(data, (byte) 3);
                backend.copyToDevice(MemorySegment.ofArray(data), target, 0, data.length);
                byte[] back = new byte[data.length];
                backend.copyToHost(target, 0, MemorySegment.ofArray(back), back.length);
                assertThat(back).containsOnly((byte) 3);
                assertThat(counters().pinned()).as("the lane's two slots, pinned again").isEqualTo(2);
            }
            backend.free(target);
            assertCleanClose(backend);
            assertThat(counters().pinned()).as("pinned allocations after the close").isZero();
        }

        /**
         * A sticky error (here CUDA_ERROR_ILLEGAL_ADDRESS, from every call once the context is lost) is said to be what it
         * is: the allocation that meets it fails with a {@link CudaContextLostException}, not as a failed map or out of
         * memory; the loss is logged once, and from then on the backend refuses work without calling the driver. The
         * manager's close still ends, releasing the context (whose last release resets it).
         */
        /**
         * The context lost while eight threads allocate, copy through the staging buffers, fill, scale with an action and
         * free, then the manager closed under them: each failure says the context is lost or the manager is closed, the
         * close ends without failing, and the manager's and backend's threads end. The close's wait for the device threw
         * the loss, so the close failed (an ERROR), freed nothing and left the manager's maintenance thread running.
         */
        static void aContextLostUnderThreadsAllocatingCopyingAndClosingFailsEachClearlyAndTheCloseEnds() throws Throwable {
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).closeTimeout(Duration.ofSeconds(2)).build();
            LogCapture managerLog = LogCapture.managerLog();
            Queue<Throwable> unclear = new ConcurrentLinkedQueue<>();
            AtomicInteger lostSeen = new AtomicInteger();
            AtomicInteger rounds = new AtomicInteger();
            List<Thread> workers = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                workers.add(Thread.ofPlatform().start(() -> {
                    float[] data = new float[1024];
                    while (true) {
                        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024)) {
                            buffer.copyFrom(data);
                            manager.ops().fill(buffer, 2.0);
                            manager.ops().scaleAsync(buffer, 2).thenRun(rounds::incrementAndGet).get(30, TimeUnit.SECONDS);
                            buffer.copyTo(data);
                        } catch (Throwable e) {
                            if (manager.isClosed() && e instanceof IllegalStateException) {
                                return;
                            }
                            if (rootCause(e) instanceof CudaContextLostException) {
                                lostSeen.incrementAndGet();
                            } else {
                                unclear.add(e);
                                return;
                            }
                        }
                    }
                }));
            }
            while (rounds.get() < 200 && unclear.isEmpty()) {
                Thread.sleep(1);
            }
            LOSE_CONTEXT.invokeExact();
            while (lostSeen.get() < 50 && unclear.isEmpty()) {
                Thread.sleep(1);
            }
            long start = System.nanoTime();
            manager.close();
            long tookMillis = (System.nanoTime() - start) / 1_000_000;
            for (Thread worker : workers) {
                worker.join(Duration.ofSeconds(30));
                assertThat(worker.isAlive()).as("a worker still running 30 s after the close").isFalse();
            }
            assertThat(unclear).as("failures that do not say the context is lost nor that the manager is closed").isEmpty();
            assertThat(managerLog.messages(Level.SEVERE)).as("the manager's close said nothing failed").isEmpty();
            long threadsDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!managersThreads().isEmpty() && System.nanoTime() < threadsDeadline) {
                Thread.sleep(10);
            }
            assertThat(managersThreads()).as("the manager's and backend's threads 10 s after the close").isEmpty();
            assertThat(tookMillis).as("ms the close took").isLessThan(10_000L);
            assertThat(counters().contextReferences()).as("context references after the close").isZero();
        }

        /** The threads a manager on CUDA starts: its maintenance, the backend's waiters and completion threads and their watch. */
        private static List<String> managersThreads() {
            return Thread.getAllStackTraces().keySet().stream().filter(Thread::isAlive).map(Thread::getName)
                    .filter(name -> name.startsWith("compute-memory-maintenance") || name.startsWith("compute-cuda-")
                            || name.startsWith("compute-completions-watch")).sorted().toList();
        }

        private static Throwable rootCause(Throwable e) {
            Throwable cause = e;
            while (cause.getCause() != null) {
                cause = cause.getCause();
            }
            return cause;
        }

        static void aStickyErrorSaysTheContextIsLostOnceAndFurtherWorkIsRefused() throws Throwable {
            VMM.invokeExact(1);
            CudaBackend backend = open();
            try (LogCapture log = LogCapture.of(CudaBackend.class.getName())) {
                UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
                UnifiedBuffer before = manager.allocate(DataType.FLOAT32, 1024);
                LOSE_CONTEXT.invokeExact();
                assertThatThrownBy(() -> manager.allocate(8 << 20, MemoryLocation.DEVICE))
                        .isInstanceOf(CudaContextLostException.class)
                        .hasMessageContaining("CUDA_ERROR_ILLEGAL_ADDRESS (700)")
                        .hasMessageContaining("context is lost");
                Calls then = Calls.now();
                long deviceAllocations = counters().device();
                for (int i = 0; i < 3; i++) {
                    assertThatThrownBy(() -> manager.ops().fill(before, 1.0)).hasRootCauseInstanceOf(CudaContextLostException.class)
                            .hasStackTraceContaining("the backend refuses further work");
                    assertThatThrownBy(() -> backend.allocate(MemoryLocation.DEVICE, 4096)).isInstanceOf(CudaContextLostException.class)
                            .hasMessageContaining("was lost");
                }
                assertThat(Calls.now().inAllSince(then, Call.LAUNCH)).as("launches once the loss is known").isZero();
                assertThat(counters().device()).as("device allocations once the loss is known").isEqualTo(deviceAllocations);
                assertThat(log.messages(Level.SEVERE)).as("the loss said once").singleElement()
                        .satisfies(message -> assertThat(message).contains("CUDA device 0", "CUDA_ERROR_ILLEGAL_ADDRESS", "restart the process"));
                manager.close();
            }
            assertThat(counters().contextReferences()).as("context references after the close").isZero();
            assertThat(counters().resets()).as("the context reset that clears the sticky error").isEqualTo(1);
        }

        /**
         * A device in prohibited compute mode, or in exclusive-process mode while another process holds it, cannot be had
         * by this process: the probe says why, so {@code auto} passes CUDA over and {@code cuda} fails with the reason,
         * rather than at the context's creation; exclusive-process mode with the device free is available. Taken between
         * the probe and the start, the start says the same.
         */
        static void aDeviceItsComputeModeKeepsFromThisProcessIsPassedOverWithItsReason() throws Throwable {
            CudaBackendProvider provider = new CudaBackendProvider();
            BackendSettings settings = BackendSettings.ofDevice(0);
            COMPUTE_MODE.invokeExact(2, 0);
            assertThat(provider.availability(settings).detail()).isEqualTo("device 0 (Stub GPU 0) is in prohibited compute mode: the"
                    + " driver lets no process use it (nvidia-smi -q shows its Compute Mode; an administrator sets it back with"
                    + " nvidia-smi -i 0 -c DEFAULT)");
            assertThatThrownBy(() -> BackendSelection.choose("auto", settings, List.of(provider)))
                    .isInstanceOf(BackendUnavailableException.class).hasMessageContaining("prohibited compute mode");
            assertThatThrownBy(() -> provider.create(settings)).isInstanceOf(BackendUnavailableException.class)
                    .hasMessageContaining("prohibited compute mode");

            COMPUTE_MODE.invokeExact(3, 1);
            BackendAvailability taken = provider.availability(settings);
            assertThat(taken.available()).isFalse();
            assertThat(taken.detail()).isEqualTo("device 0 (Stub GPU 0) is in exclusive-process compute mode and its context cannot"
                    + " be had here (cuDevicePrimaryCtxRetain: CUDA_ERROR_DEVICE_UNAVAILABLE (46)): another process holds the"
                    + " device (nvidia-smi lists it)");
            assertThatThrownBy(() -> new CudaBackend(DriverLibrary.loadedOrNull(), settings)).isInstanceOf(BackendUnavailableException.class)
                    .hasMessageContaining("exclusive-process compute mode and another process holds it");
            assertThat(counters().contextReferences()).as("nothing opened").isZero();

            COMPUTE_MODE.invokeExact(3, 0);
            assertThat(provider.availability(settings).available()).as("exclusive-process mode, the device free").isTrue();
            assertThat(counters().contextReferences()).as("the probe's context released").isZero();
            assertCleanClose((CudaBackend) provider.create(settings));
        }

        /** The context retained at the start, then refused on the thread (cuCtxSetCurrent fails): the reference goes back. */
        static void aStartThatCannotMakeTheContextCurrentReleasesItsReference() throws Throwable {
            FAIL_SET_CURRENT.invokeExact(1);
            assertThatThrownBy(Scenarios::open).isInstanceOf(CudaException.class).hasMessageContaining("cuCtxSetCurrent(device 0)");
            assertThat(counters().contextReferences()).as("context references after the failed start").isZero();
            FAIL_SET_CURRENT.invokeExact(0);
            assertCleanClose(open());
        }

        /**
         * With pinning off, a staging lane's slots are ordinary memory: where the second cannot be had (an
         * OutOfMemoryError, not a RuntimeException), the copy fails and the lane frees the slot and the event it had
         * made (the memory of a slot fits in the cap again).
         */
        static void aStagingLaneWhosePageableSlotCannotBeHadFreesWhatItMade() throws Throwable {
            CudaBackend backend = new CudaBackend(DriverLibrary.loadedOrNull(),
                    new BackendSettings(0, false, 2 << 20, Map.of("streams", "1", "staging-lanes", "1"), Duration.ofSeconds(20)));
            NativeAllocation target = backend.allocate(MemoryLocation.DEVICE, 5 << 20);
            long eventsBefore = counters().events();
            byte[] data = new byte[5 << 20];
            assertThatThrownBy(() -> backend.copyToDevice(MemorySegment.ofArray(data), target, 0, data.length))
                    .isInstanceOf(OutOfMemoryError.class);
            assertThat(counters().events()).as("events left by the lane that could not be made").isEqualTo(eventsBefore);
            try (Arena slot = Arena.ofConfined()) {
                slot.allocate(2 << 20); // within the cap only once the lane's first slot went back
            }
            backend.free(target);
            assertCleanClose(backend);
        }

        /**
         * A start failing at its op set (a kernel lookup) whose cleanup then meets a refused context release throws the
         * lookup's failure, which says what went wrong, with the release's added to it.
         */
        static void aFailedStartThrowsItsOwnFailureWhateverItsCleanupMeets() throws Throwable {
            FAIL_FUNCTION_LOOKUP.invokeExact(1);
            FAIL_RELEASE.invokeExact(1);
            assertThatThrownBy(Scenarios::open).isInstanceOf(CudaException.class).hasMessageContaining("cuModuleGetFunction(fill_f32")
                    .satisfies(failure -> assertThat(failure.getSuppressed()).singleElement().satisfies(release ->
                            assertThat(release).hasMessageContaining("cuDevicePrimaryCtxRelease(device 0) failed: CUDA_ERROR_UNKNOWN (999)")));
        }

        private static long livePages() throws Throwable {
            try (Arena scratch = Arena.ofConfined()) {
                MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 9);
                PAGE_COUNTERS.invokeExact(out);
                return out.getAtIndex(ValueLayout.JAVA_LONG, 8);
            }
        }

        /** A thread that gives the manager's cached memory back, keeping what it throws in {@code failure}. */
        private static Thread releasingCachedMemory(UnifiedMemoryManager manager, AtomicReference<Throwable> failure) {
            return Thread.ofPlatform().name("trimming").start(() -> {
                try {
                    manager.releaseCachedMemory();
                } catch (Throwable t) {
                    failure.set(t);
                }
            });
        }

        /**
         * The manager's close begun while a trim is in the driver's unmap or free waits for it, then frees the rest: the
         * memory the trim gave back is not freed a second time, nor what it has not yet kept from the close.
         */
        static void theManagersCloseWaitsForATrimInTheDriverAndFreesNothingTwice() throws Throwable {
            for (int vmm : new int[] {1, 0}) {
                VMM.invokeExact(vmm);
                CudaBackend backend = open();
                UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
                manager.allocate(8 << 20, MemoryLocation.DEVICE).close();
                UnifiedBuffer live = manager.allocate(4096, MemoryLocation.DEVICE);
                BLOCK_FREES.invokeExact();
                AtomicReference<Throwable> failure = new AtomicReference<>();
                Thread trimming = releasingCachedMemory(manager, failure);
                Thread closing;
                try {
                    while ((int) BLOCKED_FREES.invokeExact() == 0) {
                        Thread.onSpinWait();
                    }
                    closing = Thread.ofPlatform().name("closing").start(() -> {
                        try {
                            live.close();
                            manager.close();
                        } catch (Throwable t) {
                            failure.compareAndSet(null, t);
                        }
                    });
                    while (closing.isAlive() && closing.getState() == Thread.State.RUNNABLE) {
                        Thread.onSpinWait(); // until the close waits (for the trim), or has returned
                    }
                } finally {
                    UNBLOCK_FREES.invokeExact();
                }
                trimming.join();
                closing.join();
                assertThat(failure.get()).as("the trim and the close (vmm %d)", vmm).isNull();
                assertThat(counters().rejected()).as("calls the fake rejected: memory freed twice (vmm %d)", vmm).isZero();
                assertThat(counters().device()).as("device memory left (vmm %d)", vmm).isZero();
            }
        }

        /**
         * Under a cap, an allocation that needs the memory a trim stuck in the driver is giving back (still reserved until
         * the driver returns) waits for the trim, bounded, as for pending device work, rather than fail out of memory.
         */
        static void anAllocationNeedingWhatATrimInTheDriverGivesBackWaitsForItRatherThanFail() throws Throwable {
            for (int vmm : new int[] {1, 0}) {
                VMM.invokeExact(vmm);
                CudaBackend backend = open();
                try (UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).maxPoolSize(24L << 20)
                        .deviceWaitTimeout(Duration.ofSeconds(60)).build()) {
                    manager.allocate(16 << 20, MemoryLocation.DEVICE).close();
                    BLOCK_FREES.invokeExact();
                    AtomicReference<Throwable> failure = new AtomicReference<>();
                    Thread trimming = releasingCachedMemory(manager, failure);
                    CompletableFuture<UnifiedBuffer> allocation = new CompletableFuture<>();
                    try {
                        while ((int) BLOCKED_FREES.invokeExact() == 0) {
                            Thread.onSpinWait();
                        }
                        Thread allocating = Thread.ofPlatform().name("allocating").start(() -> {
                            try {
                                allocation.complete(manager.allocate(16 << 20, MemoryLocation.DEVICE));
                            } catch (Throwable t) {
                                allocation.completeExceptionally(t);
                            }
                        });
                        while (!allocation.isDone() && allocating.getState() == Thread.State.RUNNABLE) {
                            Thread.onSpinWait(); // until it waits (for the trim), or has ended
                        }
                        assertThat(allocation).as("the allocation, while the trim is in the driver (vmm %d)", vmm).isNotDone();
                    } finally {
                        UNBLOCK_FREES.invokeExact();
                    }
                    assertThat(allocation).as("the allocation, once the trim is through (vmm %d)", vmm).succeedsWithin(Duration.ofSeconds(20));
                    trimming.join();
                    assertThat(failure.get()).as("the trim").isNull();
                    allocation.join().close();
                }
                assertThat(counters().rejected()).as("calls the fake rejected").isZero();
            }
        }

        /** The manager's close under a trim that does not come back from the driver returns, bounded, keeping what it uses. */
        static void theManagersCloseUnderATrimThatStaysInTheDriverIsBounded() throws Throwable {
            for (int vmm : new int[] {1, 0}) {
                VMM.invokeExact(vmm);
                CudaBackend backend = open();
                UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).closeTimeout(Duration.ofMillis(200))
                        .deviceWaitTimeout(Duration.ofMillis(200)).build();
                manager.allocate(8 << 20, MemoryLocation.DEVICE).close();
                BLOCK_FREES.invokeExact();
                Thread trimming = Thread.ofPlatform().name("trimming").start(() -> {
                    try {
                        manager.releaseCachedMemory();
                    } catch (Throwable t) {
                        // what the trim says once the driver returns after the close is not this scenario's
                    }
                });
                try {
                    while ((int) BLOCKED_FREES.invokeExact() == 0) {
                        Thread.onSpinWait();
                    }
                    CompletableFuture<Void> closed = CompletableFuture.runAsync(manager::close);
                    assertThat(closed).as("the close under a trim stuck in the driver (vmm %d)", vmm).succeedsWithin(Duration.ofSeconds(30));
                } finally {
                    UNBLOCK_FREES.invokeExact();
                }
                trimming.join();
            }
        }
    
        // ---- a chain of device accesses and ops, as GpuBenchmark's ---------------------------------------------------

        /** The fake's count of each call, in stub_calls' order; the counts on the marked thread follow them. */
        private enum Call { LAUNCH, EVENT_RECORD, EVENT_SYNCHRONIZE, EVENT_QUERY, STREAM_WAIT_EVENT, STREAM_QUERY, EVENT_CREATE,
            CTX_GET_CURRENT, CTX_SET_CURRENT }

        /** The calls counted since {@code since}: in all, and on the thread that called stub_count_on_this_thread. */
        private record Calls(long[] counts) {
            static Calls now() throws Throwable {
                try (Arena scratch = Arena.ofConfined()) {
                    MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 2L * Call.values().length);
                    CALLS.invokeExact(out);
                    return new Calls(out.toArray(ValueLayout.JAVA_LONG));
                }
            }

            long inAllSince(Calls since, Call call) {
                return counts[call.ordinal()] - since.counts[call.ordinal()];
            }

            long onMarkedThreadSince(Calls since, Call call) {
                int at = Call.values().length + call.ordinal();
                return counts[at] - since.counts[at];
            }
        }

        private static final int CHAIN_STEPS = 100;

        /**
         * {@code steps} steps on {@code buffer}, each a kernel launched through JCuda on a device access's stream, then an
         * op on the buffer, as GpuBenchmark's chain does; the last op's future. ChainOnStandInTiming times it.
         */
        static CompletableFuture<Void> chain(UnifiedMemoryManager manager, UnifiedBuffer buffer, CUfunction scale, int steps) {
            CompletableFuture<Void> last = CompletableFuture.completedFuture(null);
            for (int step = 0; step < steps; step++) {
                try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                    CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                    CudaKernelOps.launch(scale, 1, cuda.stream(), Pointer.to(Pointer.to(cuda.pointer()),
                            Pointer.to(new long[] {buffer.elementCount()}), Pointer.to(new float[] {1.0001f})));
                }
                last = manager.ops().scaleAsync(buffer, 0.9999);
            }
            return last;
        }

        /**
         * On the calling thread a step of the chain costs its two launches, two context checks and no event call: its
         * accesses' ends and its ops are positions on the stream. The waiter covers every position made while it waited behind one marker: with
         * the device held during the chain, two markers at most for its 200 positions (the first may cover a few, the
         * second the rest), where it recorded and waited on an event per access and per op before.
         */
        static void aChainOfAccessesAndOpsCostsTheCallingThreadItsLaunchesAndTheWaiterAMarkerPerWakeUp() throws Throwable {
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
            try (PtxModule ops = backend.loadModule(CudaKernelOps.PTX);
                 UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                CUfunction scale = ops.function("scale_f32");
                chain(manager, buffer, scale, 10).get(5, TimeUnit.SECONDS); // the stream and the events made
                COUNT_ON_THIS_THREAD.invokeExact();
                Calls before = Calls.now();
                hold();
                CompletableFuture<Void> last = chain(manager, buffer, scale, CHAIN_STEPS);
                Calls queued = Calls.now();
                assertThat(last).isNotDone();
                release();
                last.get(5, TimeUnit.SECONDS);
                Calls after = Calls.now();
                assertThat(queued.onMarkedThreadSince(before, Call.LAUNCH)).as("launches on the calling thread").isEqualTo(2L * CHAIN_STEPS);
                assertThat(queued.onMarkedThreadSince(before, Call.CTX_GET_CURRENT))
                        .as("context checks on the calling thread: the access's opening and the op's launch; an order after work of the same stream needs none")
                        .isEqualTo(2L * CHAIN_STEPS);
                for (Call call : List.of(Call.EVENT_RECORD, Call.EVENT_SYNCHRONIZE, Call.EVENT_QUERY, Call.STREAM_WAIT_EVENT,
                        Call.STREAM_QUERY, Call.EVENT_CREATE, Call.CTX_SET_CURRENT)) {
                    assertThat(queued.onMarkedThreadSince(before, call)).as("%s on the calling thread", call).isZero();
                }
                assertThat(after.inAllSince(before, Call.EVENT_RECORD)).as("markers recorded").isBetween(1L, 2L);
                assertThat(after.inAllSince(before, Call.EVENT_SYNCHRONIZE)).as("markers waited on").isBetween(1L, 2L);
            }
            manager.close();
            assertCleanClose(backend);
        }

        /**
         * What the chain relies on: a position's work is still waited for on the device by another stream (an op on the
         * buffer from a thread on another stream, queued while the chain is held, ends only after the chain does, with a
         * {@code cuStreamWaitEvent} and no wait on the host), and a host read of the buffer waits for the chain's end.
         */
        static void aChainsEndIsWaitedForByWorkOnAnotherStreamOnTheDeviceAndByAHostRead() throws Throwable {
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
            try (PtxModule ops = backend.loadModule(CudaKernelOps.PTX);
                 UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                CUfunction scale = ops.function("scale_f32");
                chain(manager, buffer, scale, 10).get(5, TimeUnit.SECONDS);
                hold();
                CompletableFuture<Void> last = chain(manager, buffer, scale, CHAIN_STEPS);
                HOLD.invokeExact(0); // from here the device finishes at once what is not ordered after the chain

                AtomicReference<CompletableFuture<Void>> afterTheChain = new AtomicReference<>();
                AtomicReference<long[]> waitsAndQueriesThere = new AtomicReference<>();
                Thread other = onAnotherStream(backend, () -> {
                    try {
                        COUNT_ON_THIS_THREAD.invokeExact();
                        Calls before = Calls.now();
                        afterTheChain.set(manager.ops().scaleAsync(buffer, 2));
                        Calls after = Calls.now();
                        waitsAndQueriesThere.set(new long[] {
                                after.onMarkedThreadSince(before, Call.STREAM_WAIT_EVENT), after.onMarkedThreadSince(before, Call.EVENT_QUERY)});
                    } catch (Throwable e) {
                        throw new AssertionError(e);
                    }
                });
                other.join(5_000);
                assertThat(afterTheChain.get()).as("the op was queued without waiting on the host").isNotNull();
                assertThat(waitsAndQueriesThere.get()).as("cuStreamWaitEvent, cuEventQuery on the other thread").containsExactly(1L, 0L);

                CompletableFuture<float[]> read = CompletableFuture.supplyAsync(() -> {
                    float[] bytes = new float[1024];
                    buffer.copyTo(bytes);
                    return bytes;
                });
                Thread.sleep(300);
                assertThat(afterTheChain.get()).as("the other stream's op, ordered after the held chain on the device").isNotDone();
                assertThat(read).as("the host read, behind the held chain").isNotDone();
                assertThat(last).isNotDone();

                release();
                last.get(5, TimeUnit.SECONDS);
                afterTheChain.get().get(5, TimeUnit.SECONDS);
                read.get(5, TimeUnit.SECONDS);
            }
            manager.close();
            assertCleanClose(backend);
        }

        /**
         * Six threads on the two streams, each a chain of accesses and ops on a buffer of its own with a blocking copy
         * (an event of its own beside the positions) every few steps: every op's future completes, none is left to a
         * waiter that missed it, and the close finds nothing pending.
         */
        static void everyPositionCompletesWithThreadsSharingTheStreams() throws Throwable {
            CudaBackend backend = open();
            UnifiedMemoryManager manager = CudaTestSupport.managerOn(backend).build();
            try (PtxModule ops = backend.loadModule(CudaKernelOps.PTX)) {
                CUfunction scale = ops.function("scale_f32");
                Queue<CompletableFuture<Void>> futures = new ConcurrentLinkedQueue<>();
                Queue<Throwable> failures = new ConcurrentLinkedQueue<>();
                List<Thread> threads = new ArrayList<>();
                for (int t = 0; t < 6; t++) {
                    threads.add(Thread.ofPlatform().start(() -> {
                        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
                            for (int round = 0; round < 50; round++) {
                                futures.add(chain(manager, buffer, scale, 10));
                                buffer.copyFrom(new float[1024]);
                            }
                        } catch (Throwable e) {
                            failures.add(e);
                        }
                    }));
                }
                for (Thread thread : threads) {
                    thread.join(30_000);
                }
                assertThat(failures).isEmpty();
                assertThat(futures).hasSize(6 * 50);
                CompletableFuture.allOf(futures.toArray(CompletableFuture[]::new)).get(10, TimeUnit.SECONDS);
            }
            manager.close();
            assertCleanClose(backend);
        }
    }
}
