package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * PINNED through mlock. The real path runs against this machine's memlock limit and checks the kernel's own
 * count of locked memory; the refusal is forced through the {@link PageLocker} seam, with the errno the kernel
 * gives when the limit is reached.
 */
class PinnedMemoryTest {

    private static final long SIZE = 64 << 10;

    @Test
    void pinnedMemoryIsLockedWhenTheLimitAllowsItAndUnlockedWithAReasonWhenNot() {
        try (CpuBackend backend = new CpuBackend(BackendSettings.ofDevice(0))) {
            long lockedBefore = LinuxHost.lockedBytes();
            NativeAllocation pinned = backend.allocate(MemoryLocation.PINNED, SIZE);
            pinned.hostSegment().set(ValueLayout.JAVA_LONG, SIZE - 8, 42L);
            long limit = Posix.memlockLimit();
            boolean limitAllows = LinuxHost.mayLockWithoutLimit() || limit == Posix.RLIM_INFINITY || lockedBefore + SIZE <= limit;
            if (limitAllows) {
                assertThat(pinned.handle()).isEqualTo(CpuBackend.Origin.LOCKED);
                assertThat(LinuxHost.lockedBytes()).isGreaterThanOrEqualTo(lockedBefore + SIZE);
                assertThat(backend.lockedBytes()).isEqualTo(SIZE);
            } else {
                assertThat(pinned.handle()).isEqualTo(CpuBackend.Origin.MAPPED);
                assertThat(LinuxHost.lockedBytes()).isEqualTo(lockedBefore);
                assertThat(backend.unlockedPinnedAllocations()).isOne();
            }
            assertThat(pinned.hostSegment().get(ValueLayout.JAVA_LONG, SIZE - 8)).isEqualTo(42L);
            backend.free(pinned);
            assertThat(LinuxHost.lockedBytes()).isEqualTo(lockedBefore);
            assertThat(backend.lockedBytes()).isZero();
        }
    }

    @Test
    void aRefusedLockFallsBackToUnlockedMemoryByDefault() {
        try (CpuBackend backend = new CpuBackend(BackendSettings.ofDevice(0), (address, length) -> Posix.ENOMEM)) {
            assertThat(backend.supports(MemoryLocation.PINNED).detail()).contains("memlock limit", "pinned-fallback=unlocked");
            NativeAllocation first = backend.allocate(MemoryLocation.PINNED, SIZE);
            NativeAllocation second = backend.allocate(MemoryLocation.PINNED, 100);
            assertThat(first.handle()).isEqualTo(CpuBackend.Origin.MAPPED);
            assertThat(second.sizeBytes()).isEqualTo(backend.pageSize());
            assertThat(backend.unlockedPinnedAllocations()).isEqualTo(2);
            assertThat(backend.lockedBytes()).isZero();
            first.hostSegment().set(ValueLayout.JAVA_INT, 0, 7);
            assertThat(first.hostSegment().get(ValueLayout.JAVA_INT, 0)).isEqualTo(7);
            backend.free(first);
            backend.free(second);
        }
    }

    @Test
    void withPinnedFallbackFailARefusedLockIsOutOfMemoryNamingTheLimit() {
        BackendSettings strict = new BackendSettings(0, true, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES, Map.of("pinned-fallback", "fail"));
        try (CpuBackend backend = new CpuBackend(strict, (address, length) -> Posix.ENOMEM)) {
            assertThatThrownBy(() -> backend.allocate(MemoryLocation.PINNED, SIZE))
                    .isInstanceOf(BackendOutOfMemoryException.class)
                    .hasMessageContaining("mlock of " + SIZE + " bytes refused: ENOMEM")
                    .hasMessageContaining("the memlock limit is")
                    .hasMessageContaining(LinuxHost.mayLockWithoutLimit() ? "short of memory it can lock" : "Raise the limit (ulimit -l")
                    .hasMessageContaining("compute.memory.pinning.enabled=false");
            assertThat(backend.liveAllocations()).isZero();
            NativeAllocation host = backend.allocate(MemoryLocation.HOST, SIZE);
            assertThat(host.handle()).isEqualTo(CpuBackend.Origin.MALLOC);
            backend.free(host);
        }
    }

    @Test
    void withPinningDisabledPinnedIsUnavailableWithTheReason() {
        BackendSettings unpinned = new BackendSettings(0, false, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES, Map.of());
        try (CpuBackend backend = new CpuBackend(unpinned)) {
            assertThat(backend.supports(MemoryLocation.PINNED).available()).isFalse();
            assertThat(backend.supports(MemoryLocation.PINNED).detail()).contains("compute.memory.pinning.enabled=false");
            assertThatThrownBy(() -> backend.allocate(MemoryLocation.PINNED, 16)).isInstanceOf(IllegalArgumentException.class);
        }
    }

    @Test
    void aBadFallbackOptionNamesWhatIsAllowed() {
        BackendSettings bad = new BackendSettings(0, true, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES, Map.of("pinned-fallback", "maybe"));
        assertThatThrownBy(() -> new CpuBackend(bad)).isInstanceOf(dev.compute.memory.InvalidSettingException.class)
                .hasMessageContaining("pinned-fallback").hasMessageContaining("unlocked").hasMessageContaining("fail");
    }
}
