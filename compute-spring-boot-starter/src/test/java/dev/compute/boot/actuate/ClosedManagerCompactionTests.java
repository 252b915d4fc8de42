package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.actuate.endpoint.ComputeMemoryEndpoint;
import dev.compute.boot.actuate.endpoint.ComputeMemoryEndpoint.CompactionDescriptor;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * POST /actuator/computememory {"compact": true} where one observed manager is closed (an application's own manager
 * closed at run time, or any manager while the context shuts down): as the plain trim does, it reports nothing moved
 * for that manager and the others' results, never a 500.
 */
class ClosedManagerCompactionTests {

    @Test
    void aCompactionOfEveryManagerSkipsOneThatIsClosedAsTheTrimDoes() {
        try (UnifiedMemoryManager open = UnifiedMemoryManager.builder().backend("cpu").build();
             UnifiedMemoryManager closed = UnifiedMemoryManager.builder().backend("cpu").build()) {
            closed.close();
            Map<String, UnifiedMemoryManager> beans = new LinkedHashMap<>();
            beans.put("closedUnifiedMemoryManager", closed);
            beans.put("openUnifiedMemoryManager", open);
            ComputeMemoryEndpoint endpoint = new ComputeMemoryEndpoint(new ObservedManagers(beans, open));
            List<UnifiedBuffer> fragmenting = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                fragmenting.add(open.allocate(1 << 20, MemoryLocation.HOST));
            }
            for (int i = 0; i < 64; i += 2) {
                fragmenting.get(i).close();
            }

            assertThat(endpoint.trim(true, null, null)).as("the trim skips it").isNotNull();
            CompactionDescriptor compaction = (CompactionDescriptor) endpoint.trim(null, true, null);
            assertThat(compaction.managers()).containsKeys("open", "closed");
            assertThat(compaction.managers().get("open").locations()).containsKey(MemoryLocation.HOST);
            assertThat(compaction.managers().get("closed").releasedBytes()).isZero();
            assertThat(endpoint.trim(null, true, "closed")).as("named alone").isInstanceOf(CompactionDescriptor.class);
            fragmenting.forEach(UnifiedBuffer::close);
        }
    }
}
